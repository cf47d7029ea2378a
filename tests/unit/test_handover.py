"""A replica that found a team held by another looks again when that team's lease expires, not a whole
``worker.poll_s`` later; a lease its holder keeps renewing never makes the loop spin."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from taskzilla_sleep.core.host import _pid_namespace
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.runtime.handover import MARGIN_S, MIN_WAKE_S, BusyLeases, run_teams, wake_timer
from taskzilla_sleep.runtime.lease import Lease, team_lease_name
from taskzilla_sleep.stores.ports import LeaseClaim
from taskzilla_sleep.stores.records import LeaseState
from tests.unit.test_team_nights import NIGHT, TEAMS, _seed, _services, team_runs


class FrozenClock:
    """The night's clock stands still (03:06: prune due, distill not yet); a sleep takes wall time."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return wake.wait(max(0.0, seconds))


def _held_until(expires_at_ms: int) -> LeaseState:
    """A team lease held by a replica on another host, until ``expires_at_ms``."""
    return LeaseState(holder="worker@far", expires_at_ms=expires_at_ms, host="far", pid_ns="x", pid=1)


def test_the_wake_is_the_earliest_expiry_plus_a_margin_never_sooner_than_a_second() -> None:
    busy = BusyLeases()
    assert busy.wake_in(1000.0, poll_s=30) is None  # no team was busy: the poll
    busy.note("alpha", _held_until(1_012_000))
    busy.note("beta", _held_until(1_004_000))
    assert busy.wake_in(1000.0, poll_s=30) == pytest.approx(4 + MARGIN_S)  # beta's, the earliest
    assert busy.wake_in(1000.0, poll_s=4) is None  # the poll comes first
    busy.note("beta", _held_until(990_000))  # expired already (a holder's clock ahead of ours): no spin
    assert busy.wake_in(1000.0, poll_s=30) == MIN_WAKE_S
    busy.clear()
    assert len(busy) == 0 and busy.wake_in(1000.0, poll_s=30) is None


def test_a_wake_timer_sets_the_event_and_none_is_started_without_a_delay() -> None:
    wake = threading.Event()
    assert wake_timer(None, wake) is None
    t0 = time.monotonic()
    timer = wake_timer(0.2, wake)
    assert timer is not None and wake.wait(5)
    assert 0.15 <= time.monotonic() - t0 < 2


def test_a_holder_on_this_host_is_watched_and_its_death_wakes_the_loop_at_once() -> None:
    """A replica killed on the same host: its lease is taken at once (pid gone), so the survivor must
    not wait for the lease to expire, nor for its poll."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here = LeaseState(
            holder="worker@other", expires_at_ms=int(time.time() * 1000) + 120_000,
            host=socket.gethostname(), pid_ns=_pid_namespace(), pid=child.pid,
        )  # fmt: skip
        elsewhere = LeaseState(holder="worker@far", expires_at_ms=here.expires_at_ms, host="far", pid_ns="x", pid=1)
        busy = BusyLeases()
        busy.note("alpha", here)
        busy.note("beta", elsewhere)
        assert busy.local_pids() == {child.pid}  # only the local holder is watched
        assert busy.wake_in(time.time(), poll_s=30) is None  # its lease lasts past the poll
        wake = threading.Event()
        watch = wake_timer(None, wake, busy.local_pids())
        assert watch is not None
        assert not wake.wait(2.5)  # alive: no wake
        t0 = time.monotonic()
        child.kill()
        child.wait()
        assert wake.wait(5)
        assert time.monotonic() - t0 < MIN_WAKE_S + 1.5
    finally:
        child.kill()
        child.wait()


def test_a_team_whose_holder_stopped_renewing_is_taken_when_its_lease_expires(tmp_path: Path) -> None:
    services = _services(tmp_path)
    assert services.settings.worker.poll_s == 30
    _seed(services, TEAMS)
    # Another replica, elsewhere, took alpha and then stopped renewing: its lease runs out in 1.5 s.
    other = LeaseClaim("worker@elsewhere", "other-host", None, 1)
    assert services.graph.try_lease(team_lease_name("alpha"), other, int(time.time() * 1000), 1500, None)
    worker = Worker(services, FrozenClock(NIGHT + timedelta(minutes=1)), serve_api=False)
    try:
        worker._tick(first=True)
        assert sorted(r.team for r in team_runs(services)) == ["beta", "delta", "gamma"]  # alpha was held
        t0 = time.monotonic()
        worker._sleep_until_next()  # the poll is 30 s, the next slot (distill) 4 minutes away
        slept = time.monotonic() - t0
        assert 1.0 <= slept < 5.0, slept  # the lease's expiry (+ margin), not the poll
        worker._tick(first=False)
        alpha = [r for r in team_runs(services) if r.team == "alpha"]
        assert [[s.step for s in r.steps] for r in alpha] == [["prune"]]
    finally:
        worker._shutdown()


def test_a_lease_its_holder_renews_does_not_make_the_loop_spin(tmp_path: Path) -> None:
    services = _services(tmp_path)
    _seed(services, TEAMS)
    holder = Lease(services.graph, team_lease_name("alpha"), 1.5, me="worker@alive")  # renews every 0.5 s
    assert holder.try_acquire()
    holder.keep_alive()
    worker = Worker(services, FrozenClock(NIGHT + timedelta(minutes=1)), serve_api=False)
    ticks: list[float] = []
    tick = worker._tick

    def counted(first: bool) -> None:
        ticks.append(time.monotonic())
        tick(first)

    worker._tick = counted  # type: ignore[method-assign]
    loop = threading.Thread(target=worker.run, name="worker-under-test")
    try:
        loop.start()
        time.sleep(4.0)
    finally:
        worker.request_stop()
        loop.join(timeout=10)
        holder.release()
    assert not loop.is_alive()
    # The holder keeps its lease ~1 s ahead: the loop looks again about once a second (the floor),
    # never faster, and alpha stays with its live holder.
    assert 2 <= len(ticks) <= 6, len(ticks)
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    assert all(g >= MIN_WAKE_S * 0.9 for g in gaps), gaps
    assert "alpha" not in {r.team for r in team_runs(services)}


def test_a_pass_takes_a_team_whose_holder_died_before_the_rest_of_its_queue() -> None:
    """A pass over many teams: the team a replica found held goes again as soon as its holder is gone,
    not after the whole pass (500 teams: a pass is ~20 min on one replica)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    busy, ran, held = BusyLeases(), [], {"t1"}
    here = LeaseState(
        holder="worker@other", expires_at_ms=int(time.time() * 1000) + 120_000,
        host=socket.gethostname(), pid_ns=_pid_namespace(), pid=child.pid,
    )  # fmt: skip

    def run(team: str) -> None:
        if team in held:
            busy.note(team, here)  # what _claim does when another replica holds the team
            held.discard(team)
            return
        ran.append(team)
        if team == "t3":  # the holder dies while this replica works on t3
            child.kill()
            child.wait()

    try:
        run_teams(["t1", "t2", "t3", "t4", "t5"], busy, 1, run, threading.Event())
    finally:
        child.kill()
        child.wait()
    assert ran == ["t2", "t3", "t1", "t4", "t5"]  # t1 right after its holder died, before t4
    assert len(busy) == 0


@pytest.mark.parametrize("width", [1, 3])
def test_a_pass_runs_every_team_once_and_a_live_holders_team_is_not_retried_before_expiry(width: int) -> None:
    busy, ran, lock = BusyLeases(), [], threading.Lock()
    far = LeaseState(holder="worker@far", expires_at_ms=int(time.time() * 1000) + 60_000, host="far", pid_ns="x", pid=1)

    def run(team: str) -> None:
        if team == "t0":
            busy.note(team, far)
            return
        with lock:
            ran.append(team)

    run_teams([f"t{i}" for i in range(8)], busy, width, run, threading.Event())
    assert sorted(ran) == [f"t{i}" for i in range(1, 8)] and len(busy) == 1  # t0 waits for its lease
