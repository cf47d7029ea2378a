"""The archive: what every change (a night's run, a person's resolve or release) found before it wrote,
kept ``decay.archive_days``, so ``undo`` and ``patterns release`` can give it back.

``recording.py`` wraps the graph a change writes through (before-images first); ``undo.py`` puts
them back. The images themselves live in the graph store (``stores/ports.py``, ArchiveStore).
"""

from __future__ import annotations

from taskzilla_sleep.memory.archive.recording import Recording, recorded
from taskzilla_sleep.memory.archive.undo import (
    ReleaseReport,
    UndoRefused,
    UndoReport,
    plan_undo,
    release_pattern,
    undo_run,
)

__all__ = [
    "Recording",
    "ReleaseReport",
    "UndoRefused",
    "UndoReport",
    "plan_undo",
    "recorded",
    "release_pattern",
    "undo_run",
]
