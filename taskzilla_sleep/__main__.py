from __future__ import annotations

from taskzilla_sleep.interfaces.cli import main

raise SystemExit(main())
