"""Runs a night: the steps in cycle order, per team, with the run ledger; dry runs print the plan.

A step that fails stops the night: the rest are marked skipped and the ledger is still recorded.
Before a real (non-dry) night, reconcile repairs any drift a crashed run left between the stores,
so a crash at any point followed by a rerun converges on the state of an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.llm.base import LLMProvider
from taskzilla_sleep.memory_index import rebuild_memory
from taskzilla_sleep.models import Pattern, Run, RunTrigger, StepName, StepResult
from taskzilla_sleep.quarantine import settle
from taskzilla_sleep.reconcile import reconcile
from taskzilla_sleep.settings import Settings
from taskzilla_sleep.steps import ORDER, STEP_NAMES
from taskzilla_sleep.steps.base import Abandoned, NoUsableAnswers, StepContext
from taskzilla_sleep.stores.ports import Embedder, GraphStore, VectorStore

log = structlog.get_logger(__name__)


@dataclass
class NightResult:
    run: Run
    plans: dict[str, list[Any]] = field(default_factory=dict)  # step -> plans (one per team)
    notes: dict[str, list[str]] = field(default_factory=dict)
    repaired_drift: int = 0
    resumed: list[str] = field(default_factory=list)  # "step:team" finished from a crashed run's journal
    quarantined: int = 0  # unreadable stored items set aside by the reconcile before the steps

    @property
    def ok(self) -> bool:
        """Every step ran and succeeded (a night left at shutdown is not ok: the next start catches it up)."""
        return all(s.status == "ok" for s in self.run.steps)


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
    graph: GraphStore,
    vectors: VectorStore,
    embedder: Embedder,
    llm: LLMProvider,
    now: datetime,
    steps: Sequence[StepName] | None = None,
    trigger: RunTrigger = "manual",
    dry_run: bool = False,
    teams: Sequence[str] | None = None,
    slot: str | None = None,
    lookback: timedelta | None = None,
    clock: Callable[[], datetime] | None = None,
    before_step: Callable[[StepName], bool] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> NightResult:
    """Run ``steps`` (default all) in cycle order.

    The worker passes ``clock`` (each step decides at the time it starts), ``before_step`` (wait for
    the step's slot; False abandons the rest), ``should_stop`` (shutdown: abandon between batches)
    and ``slot`` (the night's key in the ledger). ``lookback`` makes a watchdog distill.
    """
    chosen = [s for s in STEP_NAMES if s in (steps or STEP_NAMES)]  # always cycle order
    stop = should_stop or (lambda: False)
    stamp = clock or (lambda: datetime.now(UTC))  # the ledger's times: the worker's clock, else the wall
    run = Run(
        id=run_id_for(now, trigger, chosen),
        trigger=trigger,
        started_at=stamp(),
        now=now,
        dry_run=dry_run,
        steps=[StepResult(step=s) for s in chosen],
        slot=slot,
    )
    result = NightResult(run=run)
    bound = structlog.contextvars.bound_contextvars(run_id=run.id)
    bound.__enter__()
    try:
        if not dry_run:
            drift = reconcile(graph, vectors, repair=True, now=now)
            result.repaired_drift = drift.repaired
            result.quarantined = drift.quarantined
            run.sizes_before = store_sizes(graph, vectors)
            graph.save_run(run)
        team_list = list(teams) if teams is not None else graph.teams()
        if not dry_run:
            # Before anything plans: finish what a crashed run left half-applied, from its journal.
            for team in graph.teams():
                for step in ORDER:
                    if step.resume is not None:
                        ctx = StepContext(team, now, settings, graph, vectors, embedder, llm, result.notes)
                        if step.resume(ctx) is not None:
                            result.resumed.append(f"{step.name}:{team}")
        failed = False
        pending: dict[str, dict[str, Pattern]] = {t: {} for t in team_list}
        for res in run.steps:
            if failed:
                res.status = "skipped"
                continue
            if stop() or (before_step is not None and not before_step(res.step)):
                res.status = "skipped"
                failed = True  # shutdown while waiting for the slot: the rest of the night is left
                log.info("step_left", step=res.step, reason="shutdown")
                continue
            step_now = clock() if clock is not None else now
            step = next(s for s in ORDER if s.name == res.step)
            res.status = "running"
            res.started_at = stamp()
            if not dry_run:
                graph.save_run(run)  # ops can see which step is in flight
            t0 = time.perf_counter()
            calls_before = _usage(llm)
            try:
                for team in team_list:
                    ctx = StepContext(
                        team,
                        step_now,
                        settings,
                        graph,
                        vectors,
                        embedder,
                        llm,
                        result.notes,
                        pending[team],
                        lookback=lookback,
                        should_stop=stop,
                    )
                    plan = step.plan(ctx)
                    if dry_run and res.step == "distill":
                        pending[team].update({c.pattern.id: c.pattern for c in plan.changes})
                    result.plans.setdefault(res.step, []).append(plan)
                    counts = plan.counts() if dry_run else step.apply(ctx, plan)
                    # Items the step could not read were skipped; set aside for good, the night goes on.
                    found = settle(graph, vectors, step_now, dry_run=dry_run)
                    if found:
                        counts = {**counts, "quarantined": len(found)}
                    crashpoint(f"pipeline.after_{res.step}")
                    for k, v in counts.items():
                        res.counts[k] = res.counts.get(k, 0) + int(v)
                res.status = "ok"
            except Abandoned as exc:
                res.status = "abandoned"
                res.error = str(exc)
                failed = True
                log.warning("step_abandoned", step=res.step, reason=str(exc))
            except KeyboardInterrupt:
                # Ctrl-C (or run-once's SIGTERM): the ledger says so, not "running" forever.
                res.status = "abandoned"
                res.error = "interrupted (Ctrl-C or SIGTERM)"
                log.warning("step_abandoned", step=res.step, reason="interrupted")
                raise
            except Exception as exc:  # a failed step stops the night; the ledger still records it
                if isinstance(exc, NoUsableAnswers):  # applied what it could: its counts say what
                    for k, v in exc.counts.items():
                        res.counts[k] = res.counts.get(k, 0) + int(v)
                res.status = "failed"
                res.error = f"{type(exc).__name__}: {exc}"[:500]
                failed = True
                log.error("step_failed", step=res.step, error=res.error)
            finally:
                res.finished_at = stamp()
                _usage_delta(res, calls_before, _usage(llm))
                if res.step in ("distill", "reflect"):  # the judging steps: which prompt judged
                    res.prompt_ids = [llm.prompt_ids[res.step]]
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
        run.finished_at = stamp()
        run.pattern_lags_s = [
            c.pattern.availability_lag_s
            for p in result.plans.get("distill", [])
            for c in p.changes
            if c.action == "add" and c.pattern.availability_lag_s is not None
        ]
        if not dry_run:
            if result.ok:
                # What the bot loads into its prompts: rebuilt after every successful run.
                run.memory_index_entries = rebuild_memory(graph, settings)
            try:
                run.sizes_after = store_sizes(graph, vectors)
            except StoreError as exc:
                if result.ok:
                    raise
                # A store that failed the step fails this too; the step's error is the news.
                log.warning("sizes_after_unavailable", error=str(exc)[:300])
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


def store_sizes(graph: GraphStore, vectors: VectorStore) -> dict[str, int]:
    """What ops watch grow: it must be linear in patterns, not in messages."""
    teams = vectors.teams()
    return graph.counts().sizes() | {
        "vectors_episodes": sum(vectors.count(t, "episodes") for t in teams),
        "vectors_patterns": sum(vectors.count(t, "patterns") for t in teams),
    }


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
