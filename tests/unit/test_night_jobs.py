"""A scheduled night's job state behind one object (``night.jobs.NightJobs``): which of each team's
steps are done, in flight, deferred and due, from the ledger's runs and what the pipeline reports.

The ledger here is runs built by hand and the in-memory graph store; the worker reading it on FalkorDB
and Neo4j is tests/contract/test_worker.py and tests/contract/test_replicas_http.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.errors import UsageError
from taskzilla_sleep.core.models import STEP_NAMES, Run, StepName, StepResult, StepStatusName
from taskzilla_sleep.core.settings import Settings, WatchdogSettings
from taskzilla_sleep.night.jobs import NightJobs, TeamJob, deferred_lines
from taskzilla_sleep.night.ledger import merge_runs, night_status
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, run_night
from taskzilla_sleep.observe.metrics import build_registry
from taskzilla_sleep.observe.report.model import build_report
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore
from tests.unit.test_report import CAP, GRACE_DAYS, T0, scrape

SLOT = T0.date().isoformat()
TEAMS = ("alpha", "beta")


def job(
    team: str | None,
    steps: dict[StepName, StepStatusName],
    *,
    at: int = 0,
    finished: bool = True,
    counts: dict[StepName, dict[str, int]] | None = None,
    deferred: dict[StepName, list[str]] | None = None,
    dry_run: bool = False,
    slot: str = SLOT,
) -> Run:
    """One team job's run of the slot, as the pipeline records it, started ``at`` minutes into the night."""
    start = T0 + timedelta(minutes=at)
    results = [
        StepResult(
            step=name,
            status=status,
            started_at=start,
            finished_at=start + timedelta(seconds=30) if status not in ("pending", "running") else None,
            counts=dict((counts or {}).get(name, {})),
            deferred=list((deferred or {}).get(name, [])),
        )
        for name, status in steps.items()
    ]
    return Run(
        id=f"run_{team}_{at}_{'_'.join(steps)}",
        trigger="schedule",
        started_at=start,
        finished_at=start + timedelta(minutes=1) if finished else None,
        now=T0,
        dry_run=dry_run,
        steps=results,
        slot=slot,
        team=team,
    )


def slots(minutes: dict[StepName, int]) -> dict[StepName, datetime]:
    return {step: T0 + timedelta(minutes=m) for step, m in minutes.items()}


def test_a_teams_steps_are_done_left_and_due_in_cycle_order_as_far_as_their_slots_passed() -> None:
    runs = [job("alpha", {"prune": "ok", "distill": "ok"}), job("beta", {"prune": "ok"}, at=1)]
    jobs = NightJobs(SLOT, runs, TEAMS)
    at = slots({"prune": 0, "distill": 5, "reflect": 10, "decay": 15})
    assert jobs.done("alpha") == ["prune", "distill"]
    assert jobs.left("beta") == ["distill", "reflect", "decay"]
    now = T0 + timedelta(minutes=11)
    assert jobs.due("alpha", at.__getitem__, now) == ("reflect",)  # decay's slot has not come
    assert jobs.due_jobs(at.__getitem__, now) == [
        TeamJob("alpha", ("reflect",)),
        TeamJob("beta", ("distill", "reflect")),
    ]
    assert not jobs.complete


def test_a_failed_step_tried_again_is_done_once_an_attempt_succeeds_and_its_state_is_that_attempt() -> None:
    failed = job("alpha", {"prune": "ok", "distill": "failed"})
    assert NightJobs(SLOT, [failed], ["alpha"]).left("alpha") == ["distill", "reflect", "decay"]
    retry = job("alpha", {"distill": "ok", "reflect": "ok", "decay": "ok"}, at=20)
    jobs = NightJobs(SLOT, [retry, failed], ["alpha"])  # the order read does not matter
    assert jobs.done("alpha") == list(STEP_NAMES) and jobs.complete
    assert [s.status for s in jobs.finals("distill")] == ["ok"]


def test_a_run_over_every_team_counts_for_each_and_dry_runs_for_none() -> None:
    whole = job(None, {"prune": "ok", "distill": "ok"})
    dry = job("beta", {"reflect": "ok", "decay": "ok"}, at=3, dry_run=True)
    jobs = NightJobs(SLOT, [whole, dry], TEAMS)
    assert jobs.done("alpha") == jobs.done("beta") == ["prune", "distill"]
    assert [r.id for r in jobs.runs] == [whole.id]


def test_a_job_not_finished_holds_its_steps_in_flight_until_they_are_done() -> None:
    running = job("alpha", {"prune": "ok", "distill": "running", "reflect": "pending"}, finished=False)
    jobs = NightJobs(SLOT, [running], TEAMS)
    assert jobs.in_flight("alpha") == ["distill", "reflect"]
    assert jobs.in_flight("beta") == []
    assert jobs.open  # the merged night is unfinished while a job runs
    jobs.report(running.model_copy(update={"id": running.id, "steps": [*running.steps[:1]], "finished_at": T0}))
    assert jobs.in_flight("alpha") == []


def test_the_teams_read_are_the_graphs_teams_or_the_one_asked_for() -> None:
    g = MemoryGraphStore()
    for r in (job("alpha", {"prune": "ok"}), job("beta", {"prune": "failed"}, at=1)):
        g.save_run(r)
    every = NightJobs.read(g, SLOT)
    assert every.teams == []  # no episode nor pattern in this graph: no team has a night
    one = NightJobs.read(g, SLOT, ["beta"])
    assert one.teams == ["beta"] and [r.team for r in one.runs] == ["beta"]
    assert NightJobs.read(g, SLOT, TEAMS).left("alpha") == ["distill", "reflect", "decay"]


def test_a_run_of_another_night_is_refused() -> None:
    jobs = NightJobs(SLOT, [], TEAMS)
    with pytest.raises(ValueError, match="not of night"):
        jobs.report(job("alpha", {"prune": "ok"}, slot="2026-11-29"))
    assert jobs.runs == []


def test_the_pipeline_reports_each_steps_outcome_to_the_nights_jobs(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, watchdog=WatchdogSettings(enabled=False))
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    lines = [
        json.dumps(
            {"team": "alpha", "channel": "ops", "provenance": "human", "author": who, "ts": T0.isoformat(), "text": t}
        )
        for who, t in (("ann", "Deploys need a rollback plan."), ("bob", "Write the rollback plan first."))
    ]
    services.ingestor(clock=lambda: T0 - timedelta(hours=1)).ingest_lines(lines, "alpha.jsonl")
    jobs = NightJobs.read(services.graph, SLOT, ["alpha"])
    seen: dict[StepName, list[StepName]] = {}

    def before(step: StepName) -> bool:  # what the object says as each step starts, with no read of the ledger
        seen[step] = jobs.in_flight("alpha")
        return True

    hooks = NightHooks(clock=lambda: T0, before_step=before, jobs=jobs)
    run_night(services, NightRequest(now=T0, steps=["prune", "distill"], teams=["alpha"], slot=SLOT), hooks)
    assert seen == {"prune": ["prune", "distill"], "distill": ["distill"]}
    assert jobs.done("alpha") == ["prune", "distill"] and jobs.in_flight("alpha") == []
    assert [r.model_dump() for r in jobs.runs] == [r.model_dump() for r in services.graph.slot_runs(SLOT, "alpha")]


def test_deferred_work_is_one_answer_for_the_report_the_metrics_and_the_merged_night() -> None:
    """Before the object, the report's deferred lines took each team's final attempt while the
    metrics' deferred groups summed every attempt: a distill that failed (3 groups not asked), then
    was tried again and deferred 2, read "2 groups" in the report and 5 in the metrics."""
    night = [
        job("alpha", {"prune": "ok", "distill": "failed"}, counts={"distill": {"deferred_groups": 3}}),
        job(
            "alpha",
            {"distill": "deferred", "reflect": "ok", "decay": "ok"},
            at=20,
            counts={"distill": {"deferred_groups": 2}},
            deferred={"distill": ["alpha: 2 group(s) deferred (budget: calls)"]},
        ),
        job("beta", {"prune": "ok", "distill": "ok", "reflect": "ok", "decay": "ok"}, at=1),
    ]
    jobs = NightJobs(SLOT, night, TEAMS)
    assert jobs.complete
    assert jobs.deferred() == ["distill alpha: 2 group(s) deferred (budget: calls)"]
    assert jobs.deferred_groups("distill") == 2
    g = MemoryGraphStore()
    for r in night:
        g.save_run(r)
    (report_night,) = build_report(g, 1, index_cap=CAP, grace_days=GRACE_DAYS).nights
    assert report_night.deferred == jobs.deferred()
    distill = merge_runs(night, SLOT).steps[1]
    assert distill.counts["deferred_groups"] == jobs.deferred_groups("distill")
    assert deferred_lines([distill]) == jobs.deferred("distill")
    m = scrape(build_registry(g, index_cap=CAP, grace_days=GRACE_DAYS))
    team = m["taskzilla_sleep_team_last_night_deferred_groups"]
    assert team[(("step", "distill"), ("team", "alpha"))] == jobs.deferred_groups("distill")


def test_the_status_shows_each_teams_job_state_of_a_scheduled_night() -> None:
    night = [
        job(
            "alpha",
            {"prune": "ok", "distill": "deferred"},
            deferred={"distill": ["alpha: 1 group(s) deferred (window)"]},
        ),
        job("beta", {"prune": "ok", "distill": "running", "reflect": "pending"}, at=1, finished=False),
    ]
    status = night_status(merge_runs(night, SLOT), night)
    assert not status["finished"]
    assert status["teams"] == {
        "alpha": {
            "done": ["prune", "distill"],
            "in_flight": [],
            "left": ["reflect", "decay"],
            "deferred": ["distill alpha: 1 group(s) deferred (window)"],
        },
        "beta": {
            "done": ["prune"],
            "in_flight": ["distill", "reflect"],
            "left": ["distill", "reflect", "decay"],
            "deferred": [],
        },
    }
    lone = job("alpha", {"distill": "ok"}).model_copy(update={"slot": None})  # a watchdog distill: no night's jobs
    assert night_status(lone, [lone])["teams"] == {}


def test_a_night_given_another_nights_jobs_is_refused_before_it_writes(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, watchdog=WatchdogSettings(enabled=False))
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    jobs = NightJobs("2026-11-29", [], ["alpha"])
    with pytest.raises(UsageError, match="reports to night 2026-11-29"):
        run_night(services, NightRequest(now=T0, teams=["alpha"], slot=SLOT), NightHooks(jobs=jobs))
    assert services.graph.runs(10) == [] and jobs.runs == []
