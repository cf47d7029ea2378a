"""Lease locks in the graph store, shared by every replica of the worker.

A team's consolidation work (a step of its night, a watchdog distill) runs under the team's lease
``consolidation:<team>``, so replicas share a night team by team and never work on one team at once.
Work on the whole memory (run-once, an import, a forget over the API) takes the ``consolidation``
lease and then waits until no team lease is held; a team job that finds it held backs off. (Each
side takes its own lease first and then looks at the other's, so the two never both proceed.)
The holder renews its lease while working; a dead
holder's lease expires after ``worker.lease_ttl_s`` and the next replica takes over — at once when
the holder was a process on this machine (same host and pid namespace) that no longer exists, so a
`kill -9` of a worker does not make the next `run-once` wait out the TTL. Lease times are wall-clock
(they are about process liveness, not about the night being replayed).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import structlog

from taskzilla_sleep.core.errors import Busy, StoreError, TaskzillaError

# Who a holder is lives in core/host.py (memory/inflight.py names its marks' holders the same way).
from taskzilla_sleep.core.host import _local_pid, _pid_namespace, holder_id, pid_alive
from taskzilla_sleep.stores.ports import GraphStore, LeaseClaim, LeaseState

log = structlog.get_logger(__name__)

LEASE_NAME = "consolidation"  # whole-memory work: run-once, import, forget; excludes every team lease
TEAM_LEASE_PREFIX = f"{LEASE_NAME}:"


def team_lease_name(team: str) -> str:
    """The lease a replica holds while it works on ``team`` (a step of its night, a watchdog distill)."""
    return f"{TEAM_LEASE_PREFIX}{team}"


class LeaseBusy(TaskzillaError):
    """Another process holds the lease and the caller chose not to wait. Exit code 1."""


class Lease:
    def __init__(self, graph: GraphStore, name: str, ttl_s: float, me: str | None = None) -> None:
        self._graph = graph
        self.name = name
        self.ttl_s = ttl_s
        self.me = me or holder_id()
        self._renewer: threading.Thread | None = None
        self._stop_renewing = threading.Event()
        # Held while a renewal is in flight: release() waits for it, or a renewal that lands
        # after the release would take the lease again for a process that is done with it.
        self._renewing = threading.Lock()
        self._host = socket.gethostname()
        self._pid_ns = _pid_namespace()

    def try_acquire(self) -> bool:
        if self._try(dead=None):
            return True
        dead = self._dead_holder()
        return dead is not None and self._try(dead=dead)

    def _try(self, dead: str | None) -> bool:
        claim = LeaseClaim(self.me, self._host, self._pid_ns, os.getpid())
        try:
            taken = self._graph.try_lease(self.name, claim, int(time.time() * 1000), int(self.ttl_s * 1000), dead)
        except StoreError as exc:
            # Two replicas creating the lease node at once: one loses on the uniqueness constraint.
            log.info("lease_contended", lease=self.name, error=str(exc)[:200])
            return False
        if taken and dead is not None:
            log.warning("lease_taken_from_dead_holder", lease=self.name, dead=dead, holder=self.me)
        return taken

    @property
    def team(self) -> str | None:
        """The team a team lease is for; None for the whole-memory lease (or any other name)."""
        return self.name[len(TEAM_LEASE_PREFIX) :] if self.name.startswith(TEAM_LEASE_PREFIX) else None

    def _dead_holder(self) -> str | None:
        """The holder, if it was a process of this machine's pid namespace that is gone."""
        try:
            state = self._graph.lease_state(self.name)
        except StoreError:
            return None
        return _dead_local_holder(state, self.me, self._host, self._pid_ns)

    def acquire(
        self,
        wait: bool,
        on_busy: Callable[[str | None, float], None] | None = None,
        poll_s: float = 1.0,
    ) -> float:
        """Take the lease; returns the seconds waited.

        Busy: with ``wait=False`` raise LeaseBusy naming the holder; else call ``on_busy(holder,
        seconds until its lease expires unless renewed)`` once and poll until it is free.
        """
        began = time.monotonic()
        told = False
        while not self.try_acquire():
            holder, expires_ms = self.holder()
            left_s = max(0.0, expires_ms / 1000 - time.time())
            if not wait:
                raise LeaseBusy(
                    f"the {self.name} lease is held by {holder or 'another process'} "
                    f"(expires in {left_s:.0f} s unless renewed); run again later, or without --no-wait to wait"
                )
            if not told:
                told = True
                if on_busy is not None:
                    on_busy(holder, left_s)
                log.info("lease_waiting", lease=self.name, holder=holder, expires_in_s=round(left_s))
            time.sleep(min(poll_s, max(self.ttl_s / 3, 0.1)))
        waited = time.monotonic() - began
        log.info("lease_acquired", lease=self.name, holder=self.me, waited_s=round(waited, 1))
        return waited

    def release(self) -> None:
        self._stop_renewing.set()
        with self._renewing:  # a renewal in flight ends (within its store timeout) before we release
            self._renewer = None
        try:
            self._graph.release_lease(self.name, self.me)
        except StoreError as exc:
            log.warning("lease_release_failed", lease=self.name, error=str(exc)[:200])

    def abandon_dead_runs(self) -> list[str]:
        """As the holder, mark the runs that dead processes left unfinished as abandoned.

        Holding the lease is what makes this safe: every run is done under it, so none of those
        runs belongs to a live process.
        """
        marked = self._graph.abandon_dead_runs(self.me, team=self.team)
        if marked:
            log.warning("runs_abandoned", runs=marked, by=self.me)
        return marked

    def holder(self) -> tuple[str | None, int]:
        state = self._graph.lease_state(self.name)
        return (None, 0) if state is None else (state.holder, state.expires_at_ms)

    def keep_alive(self) -> None:
        """Renew every ttl/3 in a background thread until release()."""
        self._stop_renewing.clear()

        def renew() -> None:
            while not self._stop_renewing.wait(self.ttl_s / 3):
                with self._renewing:
                    if self._stop_renewing.is_set():
                        return
                    if self.try_acquire():
                        continue
                    try:
                        holder, _ = self.holder()
                    except StoreError as exc:
                        # The store is down for now: try again next time, while the lease lasts.
                        log.warning("lease_renew_failed", lease=self.name, error=str(exc)[:200])
                        continue
                    if holder != self.me:
                        log.error("lease_lost", lease=self.name, holder=self.me, taken_by=holder)
                        return

        self._renewer = threading.Thread(target=renew, name=f"lease-{self.name}", daemon=True)
        self._renewer.start()


def _dead_local_holder(state: LeaseState | None, me: str, host: str, pid_ns: str | None) -> str | None:
    pid = _local_pid(state, host, pid_ns)
    if state is None or pid is None or state.holder == me:
        return None
    return state.holder if not pid_alive(pid) else None


def live_holder(graph: GraphStore, name: str) -> str | None:
    """Who holds lease ``name`` now: None when it is free, expired, or held by a dead local process."""
    state = graph.lease_state(name)
    if state is None or state.holder is None or state.expires_at_ms <= time.time() * 1000:
        return None
    if _dead_local_holder(state, "", socket.gethostname(), _pid_namespace()) is not None:
        return None
    return state.holder


def team_holders(graph: GraphStore) -> dict[str, str]:
    """Team -> holder, for the teams whose lease someone holds now (a replica working on them)."""
    held = {t: live_holder(graph, team_lease_name(t)) for t in graph.teams()}
    return {t: h for t, h in held.items() if h is not None}


def busy_teams(graph: GraphStore) -> list[str]:
    """The teams whose lease someone holds now (a replica working on them)."""
    return list(team_holders(graph))


def refuse_if_teams_busy(lease: Lease) -> None:
    """For a caller that chose not to wait (``--no-wait``), right after taking the consolidation lease:
    when team jobs are running, release it and raise LeaseBusy naming a team and its holder."""
    busy = team_holders(lease._graph)
    if not busy:
        return
    lease.release()
    team, holder = next(iter(sorted(busy.items())))
    more = f" and {len(busy) - 1} more team(s)" if len(busy) > 1 else ""
    raise LeaseBusy(
        f"team jobs are running: team {team} is held by {holder}{more}; "
        "run again later, or without --no-wait to wait for them"
    )


def wait_teams_idle(graph: GraphStore, wait_s: float | None, poll_s: float = 0.25) -> list[str]:
    """As the holder of the consolidation lease: wait until no team lease is held (team jobs back off
    while we hold it, so only those already running finish). Returns the teams still busy after
    ``wait_s`` (None: wait as long as it takes), else []."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    told = False
    while busy := busy_teams(graph):
        if deadline is not None and time.monotonic() >= deadline:
            return busy
        if not told:
            told = True
            log.info("lease_waiting_for_teams", teams=busy[:10], n=len(busy))
        time.sleep(poll_s)
    return []


@contextlib.contextmanager
def holding(lease: Lease) -> Iterator[None]:
    """The holder's side, once the lease is taken: runs a dead process left unfinished are marked
    abandoned (safe only for the holder), the lease is renewed while the body runs and released after
    it, also on an error, Ctrl-C or SIGTERM. The whole-memory lease first waits for the team jobs
    already running to finish (see the module doc)."""
    lease.keep_alive()
    try:
        if lease.name == LEASE_NAME:
            wait_teams_idle(lease._graph, None)
        lease.abandon_dead_runs()
        yield
    finally:
        lease.release()


@contextlib.contextmanager
def exclusive(graph: GraphStore, ttl_s: float, role: str, wait_s: float, poll_s: float = 0.25) -> Iterator[None]:
    """Hold the consolidation lease for a short write a person asked for (a forget over the API), so
    it never lands in the middle of a night. Waits up to ``wait_s``; then :class:`Busy` with a
    Retry-After of the holder's remaining lease time (a night renews it, so that is a lower bound)."""
    lease = Lease(graph, LEASE_NAME, ttl_s, me=holder_id(role))
    deadline = time.monotonic() + wait_s
    while not lease.try_acquire():
        if time.monotonic() >= deadline:
            holder, expires_ms = lease.holder()
            left_s = max(1, math.ceil(expires_ms / 1000 - time.time()))
            raise Busy(
                f"the memory is being consolidated ({holder or 'another process'} holds the {LEASE_NAME} lease); "
                f"retry in {left_s} s",
                retry_after_s=left_s,
            )
        time.sleep(poll_s)
    busy = wait_teams_idle(graph, max(0.0, deadline - time.monotonic()), poll_s)
    if busy:
        lease.release()
        left_s = max(1, math.ceil(ttl_s / 3))
        raise Busy(
            f"the memory is being consolidated (a night is working on team {busy[0]}"
            f"{f' and {len(busy) - 1} more' if len(busy) > 1 else ''}); retry in {left_s} s",
            retry_after_s=left_s,
        )
    with holding(lease):
        yield
