"""Fault-injection points for the crash-safety tests.

``crashpoint("distill.after_pattern_graph")`` kills the process with SIGKILL — no cleanup, no
finally blocks, exactly like a power cut or the OOM killer — when the environment variable
``TASKZILLA_CRASH_AT`` names that point (``NAME`` or ``NAME@N`` for its N-th pass). Unset, it
costs one dictionary lookup. The variable is read when a point is first reached, never at import.
"""

from __future__ import annotations

import os
import signal

_passes: dict[str, int] = {}


def crashpoint(name: str) -> None:
    armed = os.environ.get("TASKZILLA_CRASH_AT")
    if not armed:
        return
    target, _, nth = armed.partition("@")
    if target != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
