"""When a replica looks again at the teams another replica held: at the earliest of their leases'
expiries (plus a margin), not a whole ``worker.poll_s`` later, so a team a dead replica held is taken
over about a lease TTL after its death.

Lease times are wall-clock (``lease.py``), so the wake is a wall-clock timer that sets the worker's
wake event, whatever clock the worker's night runs on (a replay's scaled clock, a test's). A holder
that is alive renews its lease every TTL/3, so its expiry keeps moving ahead and the loop wakes at
most once per two thirds of a TTL for it; an expiry already past (a holder's clock ahead of ours, a
lease the store has not let go yet) still waits ``MIN_WAKE_S``: never a busy spin.

A holder on this host (same pid namespace) is watched more closely: its pid is checked every
``MIN_WAKE_S``, and its death wakes the loop at once (``Lease.try_acquire`` takes a dead local
holder's lease without waiting for it to expire).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from taskzilla_sleep.core.host import local_pid, pid_alive
from taskzilla_sleep.stores.records import LeaseState

MARGIN_S = 0.5  # after the expiry: the lease is free by then on every replica's reading
MIN_WAKE_S = 1.0  # the loop never looks at busy leases more often than this


class BusyLeases:
    """The teams of the current pass that another replica held, and their leases' expiries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # team jobs note from their threads
        self._expires_ms: dict[str, int] = {}
        self._local: dict[str, int] = {}  # team -> its holder's pid, when the holder runs on this host

    def note(self, team: str, lease: LeaseState | None) -> None:
        """``lease``: the team's lease as read (None: gone meanwhile, try again at once)."""
        expires = lease.expires_at_ms if lease is not None else 0
        pid = local_pid(lease)
        with self._lock:
            self._expires_ms[team] = expires
            if pid is not None:
                self._local[team] = pid

    def clear(self) -> None:
        with self._lock:
            self._expires_ms.clear()
            self._local.clear()

    def take_ready(self, wall_now_s: float) -> str | None:
        """A busy team worth trying again now, forgotten here (a claim that finds it busy again notes
        it again): its local holder died, or its lease expired (plus ``MARGIN_S``)."""
        with self._lock:
            for team, expires_ms in sorted(self._expires_ms.items(), key=lambda x: x[1]):
                pid = self._local.get(team)
                if expires_ms / 1000 + MARGIN_S <= wall_now_s or (pid is not None and not pid_alive(pid)):
                    del self._expires_ms[team]
                    self._local.pop(team, None)
                    return team
            return None

    def local_pids(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._local.values())

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


class _Watch:
    """Sets ``wake`` after ``delay_s`` wall seconds (None: never), or as soon as one of ``pids`` is
    gone (checked every ``MIN_WAKE_S``)."""

    def __init__(self, delay_s: float | None, pids: Collection[int], wake: threading.Event) -> None:
        self._cancelled = threading.Event()
        self._delay_s, self._pids, self._wake = delay_s, tuple(pids), wake
        self._thread = threading.Thread(target=self._run, name="lease-handover", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        left = self._delay_s
        while not self._cancelled.is_set():
            step = MIN_WAKE_S if left is None else min(MIN_WAKE_S, left)
            if self._cancelled.wait(step):
                return
            if left is not None:
                left -= step
            if (left is not None and left <= 0) or any(not pid_alive(p) for p in self._pids):
                self._wake.set()
                return

    def cancel(self) -> None:
        self._cancelled.set()


def wake_timer(delay_s: float | None, wake: threading.Event, pids: Collection[int] = ()) -> _Watch | None:
    """A started watch that sets ``wake`` after ``delay_s`` wall seconds, or when a local holder in
    ``pids`` dies (None: nothing to wait for). The caller cancels it once its sleep is over."""
    if delay_s is None and not pids:
        return None
    return _Watch(delay_s, pids, wake)


def run_teams(
    teams: Sequence[str], busy: BusyLeases, width: int, run: Callable[[str], None], stop: threading.Event
) -> None:
    """``run`` each team, ``width`` at a time; before each next team, one that was busy and is ready
    again (its holder died or its lease expired) goes first: a pass over many teams does not leave a
    dead replica's team for the next pass."""
    queue = deque(teams)
    lock = threading.Lock()

    def take() -> str | None:
        with lock:
            return busy.take_ready(time.time()) or (queue.popleft() if queue else None)

    def drain() -> None:
        while not stop.is_set() and (team := take()) is not None:
            run(team)

    if width <= 1:
        drain()
        return
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="team") as pool:
        for done in [pool.submit(drain) for _ in range(width)]:
            done.result()  # a job's error is raised here
