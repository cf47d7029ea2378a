"""A night as team jobs shared by replicas: two Worker objects in one process on one in-memory graph,
with a clock the test moves. Each team's steps run once, in order, never before their slot; a
replica that dies loses its team to the other; the watchdog and the night never overlap on a team."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.errors import Busy
from taskzilla_sleep.core.host import _pid_namespace
from taskzilla_sleep.core.models import STEP_NAMES, Run, StepResult
from taskzilla_sleep.core.settings import Settings, WatchdogSettings, WorkerSettings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.jobs import NightJobs
from taskzilla_sleep.night.ledger import merge_runs
from taskzilla_sleep.night.pipeline import store_sizes
from taskzilla_sleep.night.schedule import NightlySchedule
from taskzilla_sleep.runtime.lease import LEASE_NAME, Lease, exclusive, team_lease_name
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import LeaseClaim

AMS = ZoneInfo("Europe/Amsterdam")
NIGHT = datetime(2026, 11, 28, 3, 5, tzinfo=AMS)
SLOT = "2026-11-28"
TEAMS = ["alpha", "beta", "gamma", "delta"]


class HandClock:
    """The test moves time; a sleep returns at once (the jobs due never wait for a slot)."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return wake.wait(0)


def _services(tmp_path: Path, concurrency: int = 1) -> Services:
    settings = Settings(
        data_dir=tmp_path,
        worker=WorkerSettings(team_concurrency=concurrency, lease_ttl_s=60),
        watchdog=WatchdogSettings(enabled=False),
    )
    return Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())


def _seed(services: Services, teams: list[str]) -> None:
    ingestor = services.ingestor(clock=lambda: NIGHT - timedelta(hours=5))
    for team in teams:
        lines = [
            json.dumps(
                {
                    "team": team,
                    "channel": "ops",
                    "provenance": "human",
                    "author": who,
                    "text": f"Every deploy of {team} needs a rollback plan written first.",
                    "ts": (NIGHT - timedelta(hours=6, minutes=i)).isoformat(),
                }
            )
            for i, who in enumerate(["ann", "bob", "cid"])
        ]
        ingestor.ingest_lines(lines, f"{team}.jsonl")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Services, Worker, Worker, HandClock]]:
    services = _services(tmp_path)
    _seed(services, TEAMS)
    clock = HandClock(NIGHT + timedelta(minutes=1))
    a, b = (Worker(services, clock, serve_api=False) for _ in range(2))
    yield services, a, b, clock
    for w in (a, b):
        w._shutdown()


def team_runs(services: Services) -> list[Run]:
    return [r for r in services.graph.slot_runs(SLOT) if r.team is not None]


def assert_each_step_once_in_order(services: Services, teams: list[str]) -> None:
    schedule = NightlySchedule(services.settings.schedule)
    for team in teams:
        oks = [s for r in team_runs(services) if r.team == team for s in r.steps if s.status == "ok"]
        assert [s.step for s in oks] == list(STEP_NAMES), team  # each step once, in cycle order
        starts = [s.started_at for s in oks]
        assert all(t is not None for t in starts)
        assert starts == sorted(starts)  # type: ignore[type-var]
        for s in oks:  # never before its slot
            assert s.started_at is not None and s.started_at >= schedule.step_slot(NIGHT, s.step)


def test_replicas_split_the_teams_and_each_step_runs_once_at_its_slot(
    pair: tuple[Services, Worker, Worker, HandClock],
) -> None:
    services, a, b, clock = pair
    busy = Lease(services.graph, team_lease_name("alpha"), 60, me="a-is-on-alpha")
    assert busy.try_acquire()
    b._tick(first=True)  # 03:06: only prune is due; alpha is being worked on by "a"
    assert sorted(r.team for r in team_runs(services)) == ["beta", "delta", "gamma"]
    assert all([s.step for s in r.steps] == ["prune"] for r in team_runs(services))
    busy.release()
    a._tick(first=True)  # a takes alpha; beta..delta are done for now
    assert sorted(r.team for r in team_runs(services)) == ["alpha", "beta", "delta", "gamma"]
    for minutes in (11, 16, 21, 26):  # each later slot: both replicas tick at once
        clock.t = NIGHT + timedelta(minutes=minutes)
        threads = [threading.Thread(target=w._tick, args=(False,)) for w in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert_each_step_once_in_order(services, TEAMS)
    assert SLOT in a._complete or SLOT in b._complete
    jobs = NightJobs.read(services.graph, SLOT, TEAMS)
    assert jobs.due_jobs(lambda s: NIGHT, clock.t) == [] and jobs.complete
    night = merge_runs(services.graph.slot_runs(SLOT), SLOT)
    assert [s.step for s in night.steps] == list(STEP_NAMES) and all(s.status == "ok" for s in night.steps)
    # Each job recorded its own team's sizes (not the whole store's: that cost grew with the teams);
    # the night's are the teams' summed, and equal the whole store's.
    for team in TEAMS:
        last = max((r for r in team_runs(services) if r.team == team), key=lambda r: r.started_at)
        assert last.sizes_after == store_sizes(services.graph, services.vectors, team)
    whole = store_sizes(services.graph, services.vectors)
    assert night.sizes_after == {k: v for k, v in whole.items() if k not in ("entities", "relationships")}
    assert night.sizes_before["episodes_total"] == 3 * len(TEAMS) == night.sizes_after["vectors_episodes"]


def test_concurrent_team_jobs_in_one_process_run_each_step_once(tmp_path: Path) -> None:
    services = _services(tmp_path, concurrency=3)
    _seed(services, TEAMS)
    clock = HandClock(NIGHT + timedelta(minutes=30))  # a catch-up: every step is due
    worker = Worker(services, clock, serve_api=False)
    try:
        worker._tick(first=True)
    finally:
        worker._shutdown()
    assert sorted(r.team for r in team_runs(services)) == sorted(TEAMS)  # one job per team
    assert_each_step_once_in_order(services, TEAMS)
    assert all(len(r.steps) == 4 and r.trigger == "catch-up" for r in team_runs(services))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_dead_replicas_team_is_finished_by_the_other(pair: tuple[Services, Worker, Worker, HandClock]) -> None:
    services, a, b, clock = pair
    clock.t = NIGHT + timedelta(minutes=7)  # prune and distill due
    # A replica (this machine, its process gone) took alpha, finished prune, died in distill.
    dead = Run(
        id="run-dead",
        trigger="schedule",
        started_at=NIGHT,
        now=NIGHT,
        slot=SLOT,
        team="alpha",
        steps=[StepResult(step="prune", status="ok", started_at=NIGHT), StepResult(step="distill", status="running")],
    )
    services.graph.save_run(dead)
    claim = LeaseClaim("worker@dead", socket.gethostname(), _pid_namespace(), _dead_pid())
    assert services.graph.try_lease(team_lease_name("alpha"), claim, int(time.time() * 1000), 600_000, None)
    # And another replica, elsewhere and alive, holds beta: its lease must be waited out.
    other = LeaseClaim("worker@elsewhere", "other-host", None, os.getpid())
    assert services.graph.try_lease(team_lease_name("beta"), other, int(time.time() * 1000), 600_000, None)
    a._tick(first=True)
    runs = {r.id: r for r in services.graph.slot_runs(SLOT)}
    assert [s.status for s in runs["run-dead"].steps] == ["ok", "abandoned"]  # only alpha's dead run is marked
    alpha = [r for r in team_runs(services) if r.team == "alpha" and r.id != "run-dead"]
    assert [[s.step for s in r.steps] for r in alpha] == [["distill"]]  # prune is not repeated
    assert not [r for r in team_runs(services) if r.team == "beta"]  # held by a live replica
    # beta's holder stopped renewing a TTL ago (its last renewal, back-dated): b takes the team.
    assert services.graph.try_lease(team_lease_name("beta"), other, int(time.time() * 1000) - 10_000, 1_000, None)
    b._tick(first=False)
    assert [[s.step for s in r.steps] for r in team_runs(services) if r.team == "beta"] == [["prune", "distill"]]
    clock.t = NIGHT + timedelta(minutes=30)
    a._tick(first=False)
    assert_each_step_once_in_order(services, TEAMS)


def test_whole_memory_work_and_team_jobs_exclude_each_other(pair: tuple[Services, Worker, Worker, HandClock]) -> None:
    services, a, _, _ = pair
    with exclusive(services.graph, 60, "api", wait_s=1.0):  # a forget over the API holds the memory
        a._tick(first=True)
        assert team_runs(services) == []  # every team job backed off
    beta = Lease(services.graph, team_lease_name("beta"), 60, me="night-on-beta")
    assert beta.try_acquire()
    try:
        with pytest.raises(Busy, match="team beta"), exclusive(services.graph, 60, "api", wait_s=0.3, poll_s=0.05):
            pass
        assert Lease(services.graph, LEASE_NAME, 60).try_acquire()  # the failed forget let go of it
    finally:
        beta.release()


def test_the_watchdog_never_runs_during_the_teams_night(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, watchdog=WatchdogSettings(enabled=True, episode_threshold=3, lookback_hours=24)
    )
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    _seed(services, ["alpha"])
    clock = HandClock(NIGHT + timedelta(hours=8))
    worker = Worker(services, clock, serve_api=False)
    night = Lease(services.graph, team_lease_name("alpha"), 60, me="night-on-alpha")
    try:
        assert night.try_acquire()
        worker._watchdog()
        assert [r for r in services.graph.runs(10) if r.trigger == "watchdog"] == []
        night.release()
        worker._watchdog()
        (run,) = [r for r in services.graph.runs(10) if r.trigger == "watchdog"]
        assert run.team == "alpha" and [s.step for s in run.steps] == ["distill"]
    finally:
        worker._shutdown()


def test_run_once_no_wait_refuses_while_team_jobs_run_and_holds_nothing(tmp_path: Path) -> None:
    from taskzilla_sleep.interfaces.cli import _consolidation_lease
    from taskzilla_sleep.runtime.lease import LeaseBusy, live_holder

    services = _services(tmp_path)
    _seed(services, TEAMS)
    graph = services.graph
    job = Lease(graph, team_lease_name("beta"), 60, me="worker@replica-2:4242:x")  # a live replica's team job
    assert job.try_acquire()
    ran = []
    with (
        pytest.raises(LeaseBusy, match=r"team beta is held by worker@replica-2:4242:x; run again later"),
        _consolidation_lease(graph, services.settings, wait=False),
    ):
        ran.append("run-once")  # must not: a team job is running
    assert ran == []
    assert live_holder(graph, LEASE_NAME) is None  # refused: the consolidation lease is not left held
    assert live_holder(graph, team_lease_name("beta")) == job.me  # and the team job goes on
    job.release()
    with _consolidation_lease(graph, services.settings, wait=False):
        assert (live_holder(graph, LEASE_NAME) or "").startswith("run-once@")
    assert live_holder(graph, LEASE_NAME) is None
