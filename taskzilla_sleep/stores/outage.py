"""A backend found unreachable stays "down" for a moment: the calls right after fail at once.

Without this, a command that meets a dead server pays the full timeout again on every call it
still makes on its way out (the step's next write, the ledger save, the lease release): with
Neo4j killed mid-distill, run-once needed 40 s to exit. With it, the first call that finds the
server gone waits its timeout; the next ones, for ``hold_s``, fail with the same cause at once.
After ``hold_s`` a call tries the server again, so a long-running worker notices its return.
"""

from __future__ import annotations

import threading
import time

from taskzilla_sleep.core.errors import StoreError


class Outage:
    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self._lock = threading.Lock()
        self._until = 0.0
        self._cause = ""

    def check(self) -> None:
        """Raise the remembered cause while the backend counts as down."""
        with self._lock:
            if time.monotonic() < self._until:
                raise StoreError(self._cause)

    def down(self, cause: str) -> StoreError:
        """Remember that the backend is unreachable (``cause``: one line); returns the error to raise."""
        with self._lock:
            self._until = time.monotonic() + self.hold_s
            self._cause = cause
        return StoreError(cause)

    def up(self) -> None:
        with self._lock:
            self._until = 0.0
