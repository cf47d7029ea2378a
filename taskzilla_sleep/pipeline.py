"""Runs a night: the steps in cycle order, per team, with the run ledger; dry runs print the plan.

A step that fails stops the night: the rest are marked skipped and the ledger is still recorded.
Before a real (non-dry) night, reconcile repairs any drift a crashed run left between the stores,
so a crash at any point followed by a rerun converges on the state of an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.llm.base import LLMProvider
from taskzilla_sleep.models import Pattern, Run, RunTrigger, StepName, StepResult
from taskzilla_sleep.reconcile import reconcile
from taskzilla_sleep.settings import Settings
from taskzilla_sleep.steps import ORDER, STEP_NAMES
from taskzilla_sleep.steps.base import StepContext
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.vector import Embedder, VectorStore

log = structlog.get_logger(__name__)


@dataclass
class NightResult:
    run: Run
    plans: dict[str, list[Any]] = field(default_factory=dict)  # step -> plans (one per team)
    notes: dict[str, list[str]] = field(default_factory=dict)
    repaired_drift: int = 0

    @property
    def ok(self) -> bool:
        return all(s.status in ("ok", "skipped") for s in self.run.steps) and not any(
            s.status == "failed" for s in self.run.steps
        )


def parse_steps(raw: str | None) -> list[StepName]:
    """'decay,prune' -> ['prune', 'decay']: always cycle order, whatever order they were given in."""
    if not raw:
        return list(STEP_NAMES)
    wanted = {s.strip() for s in raw.split(",") if s.strip()}
    unknown = sorted(wanted - set(STEP_NAMES))
    if unknown:
        from taskzilla_sleep.errors import UsageError

        raise UsageError(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEP_NAMES)}")
    return [s for s in STEP_NAMES if s in wanted]


def run_id_for(now: datetime, trigger: str, steps: Sequence[str]) -> str:
    """Readable and unique: the night's clock, the trigger, and a hash of the steps and the wall clock."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    salt = f"{','.join(steps)}|{time.time_ns()}"
    return f"run_{stamp}_{trigger}_" + hashlib.sha256(salt.encode()).hexdigest()[:8]


def run_night(
    *,
    settings: Settings,
    graph: CypherGraphStore,
    vectors: VectorStore,
    embedder: Embedder,
    llm: LLMProvider,
    now: datetime,
    steps: Sequence[StepName] | None = None,
    trigger: RunTrigger = "manual",
    dry_run: bool = False,
    teams: Sequence[str] | None = None,
) -> NightResult:
    chosen = list(steps or STEP_NAMES)
    run = Run(
        id=run_id_for(now, trigger, chosen),
        trigger=trigger,
        started_at=datetime.now(UTC),
        now=now,
        dry_run=dry_run,
        steps=[StepResult(step=s) for s in chosen],
    )
    result = NightResult(run=run)
    bound = structlog.contextvars.bound_contextvars(run_id=run.id)
    bound.__enter__()
    try:
        if not dry_run:
            drift = reconcile(graph, vectors, repair=True)
            result.repaired_drift = drift.repaired
            graph.save_run(run)
        team_list = list(teams) if teams is not None else graph.teams()
        failed = False
        pending: dict[str, dict[str, Pattern]] = {t: {} for t in team_list}
        for res in run.steps:
            if failed:
                res.status = "skipped"
                continue
            step = next(s for s in ORDER if s.name == res.step)
            res.status = "running"
            res.started_at = datetime.now(UTC)
            t0 = time.perf_counter()
            calls_before = _usage(llm)
            try:
                for team in team_list:
                    ctx = StepContext(team, now, settings, graph, vectors, embedder, llm, result.notes, pending[team])
                    plan = step.plan(ctx)
                    if dry_run and res.step == "distill":
                        pending[team].update({c.pattern.id: c.pattern for c in plan.changes})
                    result.plans.setdefault(res.step, []).append(plan)
                    counts = plan.counts() if dry_run else step.apply(ctx, plan)
                    crashpoint(f"pipeline.after_{res.step}")
                    for k, v in counts.items():
                        res.counts[k] = res.counts.get(k, 0) + int(v)
                res.status = "ok"
            except Exception as exc:  # a failed step stops the night; the ledger still records it
                res.status = "failed"
                res.error = f"{type(exc).__name__}: {exc}"[:500]
                failed = True
                log.error("step_failed", step=res.step, error=res.error)
            finally:
                res.finished_at = datetime.now(UTC)
                _usage_delta(res, calls_before, _usage(llm))
                log.info(
                    "step_finished",
                    step=res.step,
                    status=res.status,
                    duration_s=round(time.perf_counter() - t0, 3),
                    dry_run=dry_run,
                    **res.counts,
                )
                if not dry_run:
                    graph.save_run(run)
        run.finished_at = datetime.now(UTC)
        if not dry_run:
            graph.save_run(run)
        log.info(
            "night_finished",
            ok=result.ok,
            steps=",".join(f"{s.step}:{s.status}" for s in run.steps),
            dry_run=dry_run,
            llm_calls=sum(s.llm_calls for s in run.steps),
        )
        return result
    finally:
        bound.__exit__(None, None, None)


def _usage(llm: LLMProvider) -> tuple[int, int, int, float | None]:
    u = llm.usage
    return (u.calls, u.prompt_tokens, u.completion_tokens, u.cost_usd)


def _usage_delta(
    res: StepResult, before: tuple[int, int, int, float | None], after: tuple[int, int, int, float | None]
) -> None:
    res.llm_calls = after[0] - before[0]
    res.prompt_tokens = after[1] - before[1]
    res.completion_tokens = after[2] - before[2]
    res.cost_usd = None if after[3] is None or before[3] is None else round(after[3] - before[3], 6)
