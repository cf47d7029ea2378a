"""One night's LLM allowance shared by the team jobs one process runs at once (``worker.team_concurrency``):
a Tally of the slot's spending and reservations, per-job usage scopes, and the ledger for other replicas."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from taskzilla_sleep.core.models import EpisodeStatus, Run, StepResult
from taskzilla_sleep.core.settings import NightBudget
from taskzilla_sleep.llm.base import LLMUsage, usage_scope
from taskzilla_sleep.night.budget import Estimate, Gate, Tally
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, NightResult, run_night
from taskzilla_sleep.rules.entities import EntityExtractor
from tests.unit.steps.conftest import DAY, NIGHT, Fake, belief_of_all, episode
from tests.unit.steps.test_distill import RULES, STATEMENT

ONE = Estimate(groups=1, calls=1, prompt_tokens=100, completion_tokens=50)
TEAMS = [f"team-{i}" for i in range(4)]
SLOT = "2026-11-28"


def test_a_usage_scope_counts_only_the_calls_made_in_its_own_context() -> None:
    shared = LLMUsage()  # one provider's usage, the process's
    go = threading.Barrier(3)

    def job(n: int) -> tuple[int, int]:
        with usage_scope() as mine:
            go.wait()  # the three jobs ask at the same time
            for _ in range(n):
                shared.add_call(10, 5, None)
                time.sleep(0.001)
        return mine.calls, mine.prompt_tokens

    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(job, [3, 5, 7]))
    assert got == [(3, 30), (5, 50), (7, 70)] and shared.calls == 15


def test_gates_sharing_a_tally_never_admit_more_than_the_nights_budget_between_them() -> None:
    tally, usage = Tally(), LLMUsage()
    go = threading.Barrier(6)

    def job(team: str) -> int:
        gate = Gate(NightBudget(calls=10), usage, lambda: NIGHT, None, tally, run_id=f"run-{team}")
        go.wait()
        asked = 0
        while True:
            n, reason = gate.admit(team, [ONE])
            if n == 0:
                assert reason == "budget: calls"
                return asked
            with gate.asking(team, [ONE]):
                time.sleep(0.002)  # the call: others admit meanwhile
                usage.add_call(80, 20, None)
            asked += 1

    with ThreadPoolExecutor(6) as pool:
        asked = list(pool.map(job, [f"t{i}" for i in range(6)]))
    assert sum(asked) == 10 == usage.calls
    # Each job was charged what its own calls counted (a scope each), not its neighbours' calls too.
    assert tally.spent("t0") == ((10, 1000), (asked[0], 100 * asked[0]))


def test_a_job_seeds_other_replicas_spending_from_the_ledger_and_its_own_processes_from_the_tally() -> None:
    tally = Tally()
    here = Gate(NightBudget(calls=10), LLMUsage(), lambda: NIGHT, None, tally, run_id="run-here")
    assert here.admit("a", [ONE] * 3) == (3, None)  # running, not in the ledger yet (or not up to date)

    def ledger_run(run_id: str, team: str, calls: int) -> Run:
        step = StepResult(step="distill", status="ok", llm_calls=calls, prompt_tokens=10 * calls)
        return Run(id=run_id, trigger="schedule", started_at=NIGHT, now=NIGHT, steps=[step], slot=SLOT, team=team)

    # The ledger's stale copy of this process's job ("run-here": 1 call) and another replica's job.
    runs = [ledger_run("run-here", "a", 1), ledger_run("run-there", "b", 4)]
    nxt = Gate(NightBudget(calls=10), LLMUsage(), lambda: NIGHT, None, tally, run_id="run-next")
    nxt.seed(runs, "b")
    assert nxt.spent("b") == ((7, 490), (4, 40))  # 3 reserved here (live) + 4 there; not 3 + 1 + 4
    assert nxt.admit("b", [ONE] * 5) == (3, "budget: calls")


def _team_fake(fake: Fake) -> None:
    """TEAMS, each with one group worth one distill call (the same four rules)."""
    for team in TEAMS:
        eps = [
            episode(f"{team}-r{i}", text, author, team=team, ts=DAY - timedelta(days=i % 2))
            for i, (author, text) in enumerate(RULES)
        ]
        fake.graph.upsert_episodes(eps, [link for e in eps for link in EntityExtractor().links(e)])
        fake.vectors.upsert(team, "episodes", [e.id for e in eps], [e.text for e in eps], [{}] * len(eps))
    fake.llm.beliefs = belief_of_all(STATEMENT)
    budget = NightBudget(calls=2)
    fake.settings = fake.settings.model_copy(
        update={"llm": fake.settings.llm.model_copy(update={"night_budget": budget, "max_concurrency": 1})}
    )


def _concurrent_jobs(fake: Fake, tally: Tally | None) -> list[NightResult]:
    """Every team's job at once, as the worker runs them with team_concurrency 4: each seeds its gate from
    the ledger (nothing spent yet), then all of them reach distill together."""
    at_distill = threading.Barrier(len(TEAMS))

    def before(step: str) -> bool:
        if step == "distill":
            at_distill.wait(timeout=10)
        return True

    def job(team: str) -> NightResult:
        request = NightRequest(now=NIGHT, trigger="schedule", teams=[team], slot=SLOT)
        return run_night(fake, request, NightHooks(before_step=before, tally=tally))  # type: ignore[arg-type]

    with ThreadPoolExecutor(len(TEAMS)) as pool:
        return list(pool.map(job, TEAMS))


def test_concurrent_team_jobs_share_the_nights_budget_and_the_next_night_finishes(fake: Fake) -> None:
    _team_fake(fake)
    results = _concurrent_jobs(fake, Tally())
    assert all(r.ok for r in results)
    statuses = sorted(r.run.steps[1].status for r in results)
    assert statuses == ["deferred", "deferred", "ok", "ok"] and len(fake.llm.asked) == 2  # the night's 2 calls
    assert sum(r.run.steps[1].llm_calls for r in results) == 2  # each job's ledger: its own calls only
    deferred = [r.run.team for r in results if r.run.steps[1].status == "deferred"]
    for team in deferred:
        raw = fake.graph.episodes_by_status(team or "", [EpisodeStatus.RAW.value])
        assert len(raw) == 4 and all(e.distilled_at is None for e in raw)  # left whole for the next night

    nxt = NightRequest(now=NIGHT + timedelta(days=1), trigger="schedule", slot="2026-11-29")
    second = run_night(fake, nxt, NightHooks(tally=Tally()))  # type: ignore[arg-type]
    assert second.ok and not second.deferred and len(fake.llm.asked) == 4
    assert all(len(fake.graph.patterns(t)) == 1 for t in TEAMS)


def test_without_a_shared_tally_each_concurrent_job_would_spend_the_whole_budget(fake: Fake) -> None:
    """The control: the same jobs, each with its own allowance (what the ledger alone gives them)."""
    _team_fake(fake)
    results = _concurrent_jobs(fake, None)
    assert [r.run.steps[1].status for r in results] == ["ok"] * 4 and len(fake.llm.asked) == 4
