"""taskzilla-sleep: the memory-consolidation worker that runs beside a team chat bot."""

from __future__ import annotations

__version__ = "0.1.0"
