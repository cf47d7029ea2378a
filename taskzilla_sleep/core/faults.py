"""Fault-injection points for the crash-safety and concurrency tests.

``crashpoint("distill.after_pattern_graph")`` kills the process with SIGKILL — no cleanup, no
finally blocks, exactly like a power cut or the OOM killer — when the environment variable
``TASKZILLA_CRASH_AT`` names that point (``NAME`` or ``NAME@N`` for its N-th pass). ``pausepoint``
holds the process there instead (``TASKZILLA_PAUSE_AT``), so a test can look at the stores from
another process mid-way. Unset, each costs one dictionary lookup. The variables are read when a
point is reached, never at import.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_passes: dict[str, int] = {}
PAUSE_MAX_S = 600.0  # a test that never lets go does not leave the process behind for ever


def crashpoint(name: str) -> None:
    if _armed("TASKZILLA_CRASH_AT", name):
        os.kill(os.getpid(), signal.SIGKILL)


def pausepoint(name: str) -> None:
    """At ``TASKZILLA_PAUSE_AT``'s point: create ``TASKZILLA_PAUSE_FILE`` + ``.reached``, then wait
    while ``TASKZILLA_PAUSE_FILE`` exists (the test removes it to let the process go on)."""
    if not _armed("TASKZILLA_PAUSE_AT", name):
        return
    gate = Path(os.environ["TASKZILLA_PAUSE_FILE"])
    Path(f"{gate}.reached").touch()
    until = time.monotonic() + PAUSE_MAX_S
    while gate.exists() and time.monotonic() < until:
        time.sleep(0.05)


def _armed(variable: str, name: str) -> bool:
    """This pass of point ``name`` is the one ``variable`` names (its N-th; the first by default)."""
    armed = os.environ.get(variable)
    if not armed:
        return False
    target, _, nth = armed.partition("@")
    if target != name:
        return False
    key = f"{variable}:{name}"
    _passes[key] = _passes.get(key, 0) + 1
    return _passes[key] == int(nth or 1)
