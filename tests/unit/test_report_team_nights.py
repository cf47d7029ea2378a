"""A scheduled night is many ledger runs (one per team job, each with the night's slot and its team):
the report and the metrics show it as ONE night, its figures summed over the teams.

The ledger is the in-memory graph store (the same ``night_runs`` read is checked on FalkorDB and
Neo4j in tests/contract/test_graph_store.py, and through the report command in
tests/contract/test_report_ledger.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from taskzilla_sleep.core.models import Run, StepName, StepResult
from taskzilla_sleep.core.settings import NightBudget
from taskzilla_sleep.llm.base import LLMUsage
from taskzilla_sleep.night.budget import Estimate, Gate
from taskzilla_sleep.night.jobs import NightJobs
from taskzilla_sleep.night.ledger import group_nights, merge_runs
from taskzilla_sleep.observe.metrics import build_registry
from taskzilla_sleep.observe.report.model import build_report
from taskzilla_sleep.stores.memory import MemoryGraphStore
from tests.unit.test_report import CAP, GRACE_DAYS, STEPS, T0, make_run, scrape

TEAMS = ("alpha", "beta", "gamma")
COUNTS: dict[StepName, dict[str, int]] = {
    "prune": {"examined": 10, "pruned": 1},
    "distill": {"patterns_added": 1, "evidence_bumps": 2, "absorbed": 3},
    "reflect": {"merges": 0, "contradictions": 0},
    "decay": {"retired": 1},
}


def team_night(
    day: int,
    *,
    merges: Sequence[int] = (1, 2, 3),
    index: Sequence[int] = (5, 7, 9),
    steps: Sequence[StepName] = STEPS,
    failed: tuple[str, StepName] | None = None,
) -> list[Run]:
    """A scheduled night as replicas record it: one run per team and step (a job per slot), each with
    the slot and the team; store sizes and the index size are the team's own (each job retires one
    of its team's live episodes)."""
    slot = (T0 + timedelta(days=day)).date().isoformat()
    runs: list[Run] = []
    for i, name in enumerate(steps):
        for j, team in enumerate(TEAMS):
            start = T0 + timedelta(days=day, minutes=5 * i, seconds=10 * j)
            bad = failed == (team, name)
            counts = dict(COUNTS[name]) | ({"merges": merges[j]} if name == "reflect" else {})
            step = StepResult(
                step=name,
                status="failed" if bad else "ok",
                started_at=start,
                finished_at=start + timedelta(seconds=2),
                counts={} if bad else counts,
                llm_calls=2 if name == "distill" else 0,
                prompt_tokens=100 if name == "distill" else 0,
                completion_tokens=10 if name == "distill" else 0,
                cost_usd=0.01 if name == "distill" else 0.0,
                error="StoreError: connection reset" if bad else None,
            )
            live = (100, 60, 40)[j] - i
            runs.append(
                Run(
                    id=f"job-{slot}-{team}-{name}",
                    trigger="schedule",
                    started_at=start,
                    finished_at=start + timedelta(seconds=3),
                    now=start,
                    steps=[step],
                    slot=slot,
                    team=team,
                    sizes_before={"episodes_total": 100, "episodes_live": live, "patterns_live": 4 - (j > 0)},
                    sizes_after={"episodes_total": 100, "episodes_live": live - 1, "patterns_live": 4 - (j > 0)},
                    memory_index_entries=None if bad else index[j] + i,
                )
            )
    return runs


def ledger(*runs: Run) -> MemoryGraphStore:
    g = MemoryGraphStore()
    for r in runs:
        g.save_run(r)
    return g


def test_a_night_of_three_teams_by_four_steps_is_one_night_in_the_report_and_the_metrics() -> None:
    at = T0 + timedelta(days=1, hours=8)
    watchdog = make_run(1, trigger="watchdog").model_copy(
        update={"started_at": at, "now": at, "finished_at": at + timedelta(seconds=5), "slot": None, "team": TEAMS[0]}
    )
    watchdog.steps = [s for s in watchdog.steps if s.step == "distill"]
    g = ledger(*team_night(0), *team_night(1, merges=(0, 1, 1)), watchdog)
    assert len(g.runs(100)) == 25

    report = build_report(g, 3, index_cap=CAP, grace_days=GRACE_DAYS, now=T0 + timedelta(days=2))
    assert [x.run_id for x in report.nights] == ["night_2026-11-28", "night_2026-11-29", "run_01_watchdog"]
    first, second = report.nights[0], report.nights[1]
    assert first.status == "ok" and [s.step for s in first.steps] == list(STEPS)
    assert (first.merges, second.merges) == (6, 2)  # summed over the teams
    assert (first.patterns_added, first.pruned, first.retired) == (3, 3, 3)
    assert (first.llm_calls, first.prompt_tokens, first.cost_usd) == (6, 300, 0.03)
    assert first.started_at == T0 and first.duration_s == 15 * 60 + 20 + 3  # first job's start to last job's end
    assert first.step("reflect") is not None and first.step("reflect").duration_s == 22  # type: ignore[union-attr]
    # Store sizes: each team's before its first job and after its last one, summed over the teams.
    assert (first.sizes_before["episodes_live"], first.size("episodes_live")) == (200, 188)
    assert (first.size("episodes_total"), first.size("patterns_live")) == (300, 10)
    # The watchdog's run recorded its one team's sizes: not the store's, so not shown as the store's.
    assert report.nights[2].sizes_after == {} and report.nights[2].size("episodes_live") is None
    # Each team's index after its last job (5+3, 7+3, 9+3), summed; the watchdog's one team is no night's index.
    assert first.memory_index_entries == 30 and report.memory_index_sizes == [30, 30]
    assert {s.name: s.verdict for s in report.signals}["failed_steps"] == "ok"
    assert report.signals[4].reason == "0 failed of 9 steps in 3 runs"  # 4 + 4 + the watchdog's 1
    # Two nights asked for: two nights read, not the last two of 25 runs.
    assert [x.run_id for x in build_report(g, 2, index_cap=CAP, grace_days=GRACE_DAYS).nights] == [
        "night_2026-11-29",
        "run_01_watchdog",
    ]

    m = scrape(build_registry(g, index_cap=CAP, grace_days=GRACE_DAYS, window=2))
    p = "taskzilla_sleep_"
    assert m[p + "last_night_timestamp_seconds"][()] == (T0 + timedelta(days=1)).timestamp()  # not the watchdog
    assert m[p + "last_night_ok"][()] == 1.0
    assert m[p + "last_night_steps"][(("kind", "merges"), ("step", "reflect"))] == 2.0
    assert m[p + "last_night_steps"][(("kind", "patterns_added"), ("step", "distill"))] == 3.0
    assert m[p + "last_night_llm_calls"][(("step", "distill"),)] == 6.0
    assert m[p + "last_night_duration_seconds"][()] == 923.0
    assert m[p + "last_success_timestamp_seconds"][()] == (T0 + timedelta(days=1, minutes=15, seconds=23)).timestamp()
    health = {dict(k)["signal"]: v for k, v in m[p + "health"].items()}
    assert health["failed_steps"] == 0.0


def test_a_team_that_failed_a_step_fails_the_night_until_it_succeeds() -> None:
    night = team_night(0, failed=("gamma", "decay"))
    merged = merge_runs(night, "2026-11-28")
    decay = merged.steps[-1]
    assert decay.status == "failed" and decay.error == "StoreError: connection reset"
    assert decay.counts == {"retired": 2}  # alpha's and beta's
    g = ledger(*night)
    m = scrape(build_registry(g, index_cap=CAP, grace_days=GRACE_DAYS))
    assert m["taskzilla_sleep_last_night_step_failed"][(("step", "decay"),)] == 1.0
    assert m["taskzilla_sleep_last_night_step_failed"][(("step", "reflect"),)] == 0.0
    assert m["taskzilla_sleep_last_night_ok"][()] == 0.0
    # gamma's decay tried again later in the same night, and it worked: the night is ok.
    retry = team_night(0, index=(0, 0, 7), steps=["decay"])[2].model_copy(
        update={"id": "retry", "started_at": T0 + timedelta(minutes=40), "finished_at": T0 + timedelta(minutes=41)}
    )
    (healed,) = group_nights([*night, retry])
    assert healed.steps[-1].status == "ok" and healed.finished_at is not None
    assert healed.memory_index_entries == 8 + 10 + 7  # gamma's newest index size is its retry's


def test_a_night_half_done_is_incomplete_not_ok() -> None:
    done, half = team_night(0), team_night(1, steps=["prune", "distill"])
    (night,) = group_nights(half)
    assert night.finished_at is None  # every job so far finished, but the teams have steps left
    g = ledger(*done, *half)
    report = build_report(g, 5, index_cap=CAP, grace_days=GRACE_DAYS)
    assert [x.status for x in report.nights] == ["ok", "incomplete"]
    m = scrape(build_registry(g, index_cap=CAP, grace_days=GRACE_DAYS))
    assert m["taskzilla_sleep_last_night_timestamp_seconds"][()] == T0.timestamp()  # the finished night


def test_a_team_whose_distill_was_deferred_is_done_and_the_night_ok_with_its_deferred_line() -> None:
    night = team_night(0)
    beta = next(r for r in night if r.team == "beta" and r.steps[0].step == "distill")
    beta.steps[0].status, beta.steps[0].deferred = "deferred", ["beta: 2 group(s) deferred (budget: calls)"]
    jobs = NightJobs("2026-11-28", night, TEAMS)
    assert jobs.left("beta") == []  # the slot is finished: no replica runs it again
    assert (jobs.due_jobs(lambda _step: T0, T0 + timedelta(hours=1)), jobs.complete) == ([], True)
    merged = merge_runs(night, "2026-11-28")
    distill = next(s for s in merged.steps if s.step == "distill")
    assert distill.status == "deferred"  # worse than ok, still done
    assert distill.deferred == ["beta: 2 group(s) deferred (budget: calls)"]
    assert merged.finished_at is not None
    (report_night,) = build_report(ledger(*night), 1, index_cap=CAP, grace_days=GRACE_DAYS).nights
    assert report_night.status == "ok" and report_night.deferred == [
        "distill beta: 2 group(s) deferred (budget: calls)"
    ]


def test_a_team_jobs_gate_counts_what_the_nights_earlier_jobs_spent_on_distill() -> None:
    budget = NightBudget(calls=7, team_calls=3)
    gate = Gate(budget, LLMUsage(), lambda: T0, None)
    earlier = [r for r in team_night(0) if r.team in ("alpha", "beta")]  # 2 distill calls each, 110 tokens
    gate.seed(earlier, "beta")
    assert gate.spent("beta") == ((4, 220), (2, 110))
    one_call = Estimate(groups=1, calls=1, prompt_tokens=5)
    assert gate.admit("beta", [one_call, one_call]) == (1, "budget: calls")  # beta's 2 + 1 = its 3
    assert gate.admit("gamma", [one_call] * 4) == (2, "budget: calls")  # the night's 4 + beta's 1 + 2 = 7


def test_a_nights_sizes_are_its_teams_summed_and_a_team_not_done_yet_counts_as_before() -> None:
    runs = team_night(0, steps=("prune", "distill"))
    open_job = runs[-1].model_copy(update={"id": "job-open", "finished_at": None, "sizes_after": {}})
    runs = [*runs[:-1], open_job]  # gamma's distill is still running: its last sizes are prune's
    night = merge_runs(runs, runs[0].slot or "")
    assert night.sizes_before["episodes_live"] == 100 + 60 + 40
    assert night.sizes_after["episodes_live"] == 98 + 58 + 39
    # A run over every team (before team jobs) recorded the whole store: taken as it is.
    whole = make_run(0).model_copy(update={"slot": runs[0].slot, "sizes_before": {"x": 5}, "sizes_after": {"x": 4}})
    assert merge_runs([whole], runs[0].slot or "").sizes_after == {"x": 4}
