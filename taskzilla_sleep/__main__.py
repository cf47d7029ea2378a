from __future__ import annotations

from taskzilla_sleep.cli import main

raise SystemExit(main())
