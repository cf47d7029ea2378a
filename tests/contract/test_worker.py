"""The worker loop in-process on the embedded stores, with a controlled clock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.models import Run
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.ledger import merge_runs
from taskzilla_sleep.night.schedule import NightlySchedule, ScaledClock

AMS = ZoneInfo("Europe/Amsterdam")


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    # The clocks here run up to 20,000x: a second of a loaded machine is hours of night, so the
    # window's hard stop (tested in test_night_budget.py) is pushed out of the way (12 h of grace).
    overrides = {"worker.poll_s": 600, "schedule.window_grace_minutes": 720}
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides=overrides)
    with build(settings) as s:
        # One team, so each night has a team job to run (a night of no teams records nothing).
        line = {
            "team": "seed",
            "channel": "ops",
            "provenance": "human",
            "author": "ann",
            "text": "Deploys are on Tuesdays.",
        }
        s.ingestor().ingest_lines([json.dumps({**line, "ts": "2026-01-01T12:00:00+00:00"})], "seed")
        yield s


def run_for(services: Services, clock: ScaledClock, until: datetime, timeout_s: float = 60) -> Worker:
    w = Worker(services, clock, serve_api=False)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while clock.now() < until and time.monotonic() < deadline:
        time.sleep(0.05)
    w.request_stop()
    t.join(timeout=30)
    assert not t.is_alive()
    return w


def nightly(services: Services) -> list[Run]:
    """Each night as one run, from its team jobs' runs."""
    slots = {r.slot for r in services.graph.runs(1000) if r.slot}
    return sorted((merge_runs(services.graph.slot_runs(k), k) for k in slots if k), key=lambda r: r.now)


class SkippingClock(ScaledClock):
    """A controlled clock that runs ``speed`` times faster while the worker works and skips ahead when it
    waits (every wait of the worker is on this clock): four days of nights take as long as their work,
    not 18 s of a 20,000x clock, and a loaded machine cannot make a night's steps late."""

    def __init__(self, start: datetime, speed: float) -> None:
        super().__init__(start, speed)
        self._skipped = timedelta(0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return super().now() + self._skipped

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        if wake.is_set():
            return True
        with self._lock:
            self._skipped += timedelta(seconds=max(0.0, seconds))
        return wake.wait(0.001)


@pytest.mark.parametrize("start", ["2027-03-26T12:00:00+01:00", "2027-10-29T12:00:00+02:00"])
def test_each_night_runs_exactly_once_at_its_slots_across_dst(services: Services, start: str) -> None:
    t0 = datetime.fromisoformat(start)
    clock = SkippingClock(t0, speed=600)
    run_for(services, clock, t0 + timedelta(days=4, hours=6))
    runs = nightly(services)
    slots = [r.slot for r in runs]
    first = t0.astimezone(AMS).date()
    assert slots == [(first + timedelta(days=i)).isoformat() for i in range(5)]  # catch-up of t0's night + 4
    assert runs[0].trigger == "catch-up" and all(r.trigger == "schedule" for r in runs[1:])
    schedule = NightlySchedule(services.settings.schedule)
    for r in runs[1:]:
        night = datetime.combine(datetime.fromisoformat(r.slot or "").date(), dtime(3, 5), tzinfo=AMS)
        assert [s.status for s in r.steps] == ["ok"] * 4
        starts = [s.started_at for s in r.steps]
        assert all(a is not None for a in starts)
        assert starts == sorted(starts)  # type: ignore[type-var]
        for s in r.steps:  # never before its slot
            assert s.started_at is not None and s.started_at >= schedule.step_slot(night, s.step)


def test_a_missed_night_is_caught_up_once_not_once_per_night(services: Services) -> None:
    t0 = datetime.fromisoformat("2026-12-05T12:00:00+01:00")  # nights of Dec 1..5 never ran
    clock = SkippingClock(t0, speed=600)
    run_for(services, clock, t0 + timedelta(minutes=30))
    runs = nightly(services)
    assert [(r.slot, r.trigger) for r in runs] == [("2026-12-05", "catch-up")]


def test_the_watchdog_distills_after_three_new_episodes(services: Services) -> None:
    t0 = datetime.fromisoformat("2026-11-30T09:50:00+01:00")
    clock = ScaledClock(t0, speed=120)
    w = Worker(services, clock, serve_api=False)
    w.services.graph.set_meta("last_distill_at:platform", str(int((t0 - timedelta(hours=6)).timestamp() * 1000)))
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while "2026-11-30" not in w._complete and time.monotonic() < deadline:
        time.sleep(0.05)  # the start-up catch-up of this morning's night (empty stores) comes first
    lines = [
        {"author": "martin", "text": "From today every incident gets a written postmortem within two days."},
        {"author": "sara", "text": "Reminder: write the incident postmortem within two days, every time."},
        {"author": "lena", "text": "Every incident needs its postmortem document written within 2 days."},
    ]
    try:
        for i, ln in enumerate(lines):
            ep = {
                "team": "platform",
                "channel": "ops",
                "provenance": "human",
                **ln,
                "ts": (clock.now() - timedelta(seconds=5)).isoformat(),
            }
            w.ingestor.ingest_lines([json.dumps(ep)], f"line{i}")
            w._wake.set()
        deadline = time.monotonic() + 30
        found = []
        while time.monotonic() < deadline and not found:
            found = [p for p in services.graph.patterns("platform") if "postmortem" in p.statement.casefold()]
            time.sleep(0.1)
    finally:
        w.request_stop()
        thread.join(timeout=30)
    assert found, "the watchdog did not distill the new rule"
    (pat,) = found
    assert pat.availability_lag_s is not None and 0 <= pat.availability_lag_s <= 35 * 60
    watch = [r for r in services.graph.runs(20) if r.trigger == "watchdog"]
    assert watch and all([s.step for s in r.steps] == ["distill"] for r in watch)
    assert [lag for r in watch for lag in r.pattern_lags_s] == [pat.availability_lag_s]
    # Nothing is marked as distilled for the night: tonight's distill still takes the whole day into account.
    assert all(e.distilled_at is None for e in services.graph.get_episodes(pat.evidence_ids))
