"""When a replica looks again at the teams another replica held: at the earliest of their leases'
expiries (plus a margin), not a whole ``worker.poll_s`` later, so a team a dead replica held is taken
over about a lease TTL after its death.

Lease times are wall-clock (``lease.py``), so the wake is a wall-clock timer that sets the worker's
wake event, whatever clock the worker's night runs on (a replay's scaled clock, a test's). A holder
that is alive renews its lease every TTL/3, so its expiry keeps moving ahead and the loop wakes at
most once per two thirds of a TTL for it; an expiry already past (a holder's clock ahead of ours, a
lease the store has not let go yet) still waits ``MIN_WAKE_S``: never a busy spin.
"""

from __future__ import annotations

import threading

MARGIN_S = 0.5  # after the expiry: the lease is free by then on every replica's reading
MIN_WAKE_S = 1.0  # the loop never looks at busy leases more often than this


class BusyLeases:
    """The teams of the current pass that another replica held, and their leases' expiries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # team jobs note from their threads
        self._expires_ms: dict[str, int] = {}

    def note(self, team: str, expires_at_ms: int) -> None:
        with self._lock:
            self._expires_ms[team] = expires_at_ms

    def clear(self) -> None:
        with self._lock:
            self._expires_ms.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._expires_ms)

    def wake_in(self, wall_now_s: float, poll_s: float) -> float | None:
        """Wall seconds until the loop should try the busy teams again: the earliest expiry plus
        ``MARGIN_S``, at least ``MIN_WAKE_S``; None when no team was busy or the poll comes first."""
        with self._lock:
            if not self._expires_ms:
                return None
            earliest = min(self._expires_ms.values()) / 1000
        delay = max(MIN_WAKE_S, earliest - wall_now_s + MARGIN_S)
        return delay if delay < poll_s else None


def wake_timer(delay_s: float | None, wake: threading.Event) -> threading.Timer | None:
    """A started daemon timer that sets ``wake`` after ``delay_s`` wall seconds (None: none needed).
    The caller cancels it once its sleep is over."""
    if delay_s is None:
        return None
    timer = threading.Timer(delay_s, wake.set)
    timer.daemon = True
    timer.name = "lease-handover"
    timer.start()
    return timer
