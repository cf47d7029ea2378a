"""Runs a night: the steps in cycle order, per team, with the run ledger; dry runs keep the plans.

A step that fails stops the night: the rest are marked skipped and the ledger is still recorded.
Before a real (non-dry) night, reconcile repairs any drift a crashed run left between the stores,
so a crash at any point followed by a rerun converges on the state of an uninterrupted run. The
runner knows no step by name: it reads, decides and writes each one through ``steps.ORDER``, and
asks a plan what a dry run or the ledger needs of it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

import structlog

from taskzilla_sleep.core.errors import StoreError, UsageError
from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.models import STEP_DONE, STEP_NAMES, Pattern, Run, RunTrigger, StepName, StepResult
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.llm.base import LLMProvider, LLMUsage, usage_scope
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.memory.index import rebuild_memory
from taskzilla_sleep.memory.quarantine import settle
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.budget import Gate, Tally
from taskzilla_sleep.night.jobs import NightJobs, deferred_lines
from taskzilla_sleep.night.steps import ORDER, Plan, Step, StepContext
from taskzilla_sleep.night.steps.base import Abandoned, NoUsableAnswers
from taskzilla_sleep.stores.ports import ChangeRecord, Embedder, GraphStore, VectorStore

log = structlog.get_logger(__name__)
P = TypeVar("P")


class NightServices(Protocol):
    """What a night runs on (``app.Services`` is one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def graph(self) -> GraphStore: ...

    @property
    def vectors(self) -> VectorStore: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def llm(self) -> LLMProvider: ...


@dataclass(frozen=True)
class NightRequest:
    now: datetime  # the clock every decision is taken at (replays set it)
    steps: Sequence[StepName] | None = None  # default all; always run in cycle order
    trigger: RunTrigger = "manual"
    dry_run: bool = False
    teams: Sequence[str] | None = None  # default every team in the graph
    slot: str | None = None  # the scheduled night this is (the ledger's key for exactly-once)
    lookback: timedelta | None = None  # a watchdog distill: only this window


@dataclass(frozen=True)
class NightHooks:
    """How the worker steers a night: each step decides at ``clock()`` when it starts (or as of
    ``now_of(step)``), ``before_step`` waits for its slot (False abandons the rest), ``should_stop``
    asks to stop between batches (shutdown)."""

    clock: Callable[[], datetime] | None = None
    # The time a step decides as of, when not the clock at its start: a scheduled night's step slot,
    # so the outcome does not depend on which replica ran it, nor when (a team handed over mid-night).
    now_of: Callable[[StepName], datetime] | None = None
    before_step: Callable[[StepName], bool] | None = None
    should_stop: Callable[[], bool] | None = None
    # Held around the drift repair: the worker's ingest gate, so an ingest in flight is not drift.
    quiet: Callable[[], AbstractContextManager[None]] = nullcontext
    # The worker's counters: step durations, pattern lags and drift of the nights it runs.
    instruments: Instruments | None = None
    # The window's hard stop (schedule.window_end + grace): past it no model question is asked, the
    # rest of distill and the judging steps not started are recorded "deferred" (None: no stop).
    deadline: datetime | None = None
    # What this process's jobs of the same scheduled night spent, shared by the jobs running at once
    # (None: this night's own); other replicas' jobs are seen through the ledger as the night starts.
    tally: Tally | None = None
    # The scheduled night's job state (a team job's): told each outcome as the ledger records it.
    jobs: NightJobs | None = None


@dataclass
class NightResult:
    run: Run
    plans: dict[StepName, list[Plan]] = field(default_factory=dict)  # step -> plans (one per team)
    notes: dict[str, list[str]] = field(default_factory=dict)
    repaired_drift: int = 0
    resumed: list[str] = field(default_factory=list)  # "step:team" finished from a crashed run's journal
    quarantined: int = 0  # unreadable stored items set aside by the reconcile before the steps

    @property
    def ok(self) -> bool:
        """Every step ran and succeeded, or did what the budget or the window allowed ("deferred": the
        next night takes the rest first). A night left at shutdown is not ok: the next start catches it up."""
        return all(s.status in STEP_DONE for s in self.run.steps)

    @property
    def deferred(self) -> list[str]:
        """What the budget or the window left for the next night, one line per step and team."""
        return deferred_lines(self.run.steps)

    def plans_of(self, kind: type[P]) -> list[P]:
        """Every plan of one kind (e.g. ``DistillPlan``), in step and team order."""
        return [p for plans in self.plans.values() for p in plans if isinstance(p, kind)]


def parse_steps(raw: str | None) -> list[StepName]:
    """'decay,prune' -> ['prune', 'decay']: always cycle order, whatever order they were given in."""
    if not raw:
        return list(STEP_NAMES)
    wanted = {s.strip() for s in raw.split(",") if s.strip()}
    unknown = sorted(wanted - set(STEP_NAMES))
    if unknown:
        raise UsageError(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEP_NAMES)}")
    return [s for s in STEP_NAMES if s in wanted]


def run_id_for(now: datetime, trigger: str, steps: Sequence[str]) -> str:
    """Readable and unique: the night's clock, the trigger, and a hash of the steps and the wall clock."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    salt = f"{','.join(steps)}|{time.time_ns()}"
    return f"run_{stamp}_{trigger}_" + hashlib.sha256(salt.encode()).hexdigest()[:8]


def run_night(services: NightServices, request: NightRequest, hooks: NightHooks | None = None) -> NightResult:
    """Run the requested steps, in cycle order, for every team (or the ones asked for)."""
    return _Night(services, request, hooks or NightHooks()).run()


class _Night:
    """One night's state while it runs: the ledger entry, the plans, the dry run's pending patterns."""

    def __init__(self, services: NightServices, request: NightRequest, hooks: NightHooks) -> None:
        self.services, self.request, self.hooks = services, request, hooks
        if hooks.jobs is not None and (hooks.jobs.slot != request.slot or request.dry_run):
            # Before anything is written: a night reports to its own slot's jobs only.
            raise UsageError(
                f"a run of slot {request.slot} (dry run: {request.dry_run}) reports to night {hooks.jobs.slot}"
            )
        self.graph, self.llm = services.graph, services.llm
        self.stop = hooks.should_stop or (lambda: False)
        self.stamp = hooks.clock or (lambda: datetime.now(UTC))  # the ledger's times: the worker's clock, else the wall
        chosen = [s for s in STEP_NAMES if s in (request.steps or STEP_NAMES)]
        run = Run(
            id=run_id_for(request.now, request.trigger, chosen),
            trigger=request.trigger,
            started_at=self.stamp(),
            now=request.now,
            dry_run=request.dry_run,
            steps=[StepResult(step=s) for s in chosen],
            slot=request.slot,
            # A worker's team job works on one team: the ledger says which (replicas share a night by team).
            team=request.teams[0] if request.teams is not None and len(request.teams) == 1 else None,
        )
        self.result = NightResult(run=run)
        # What the night's steps write is archived first (undo RUN_ID), unless the archive is off.
        self.change: ChangeRecord | None = None
        if not request.dry_run and services.settings.decay.archive_days > 0:
            wall = datetime.now(UTC)
            self.change = ChangeRecord(
                id=run.id, kind="run", at=request.now, recorded_at=wall, seq=time.time_ns(), by=request.trigger
            )
        self.pending: dict[str, dict[str, Pattern]] = {}  # dry runs: per team, what earlier steps would write
        budget = services.settings.llm.night_budget
        self.gate = Gate(budget, self.llm.usage, self.stamp, hooks.deadline, hooks.tally, run.id)

    def context(self, team: str, now: datetime) -> StepContext:
        s = self.services
        return StepContext(
            team,
            now,
            s.settings,
            self.graph if self.change is None else recorded(self.graph, self.change, team),
            s.vectors,
            s.embedder,
            self.llm,
            self.pending.setdefault(team, {}),
            lookback=self.request.lookback,
            should_stop=self.stop,
            gate=self.gate,
        )

    def run(self) -> NightResult:
        request, run = self.request, self.result.run
        with structlog.contextvars.bound_contextvars(run_id=run.id):
            if not request.dry_run:
                self._prepare()
            teams = list(request.teams) if request.teams is not None else self.graph.teams()
            failed = False
            for res in run.steps:
                if failed:
                    res.status = "skipped"
                    continue
                if self.stop() or (self.hooks.before_step is not None and not self.hooks.before_step(res.step)):
                    res.status = "skipped"
                    failed = True  # shutdown while waiting for the slot: the rest of the night is left
                    log.info("step_left", step=res.step, reason="shutdown")
                    continue
                step = next(s for s in ORDER if s.name == res.step)
                if step.prompt is not None and self.gate.past_deadline():
                    # A judging step is not started past the window: what it would judge stays pending
                    # (distill's new episodes unmarked, reflect's watermark unmoved); decay still runs.
                    who = "every team" if request.teams is None else ", ".join(teams)  # a team job: its team
                    res.status, res.deferred = "deferred", [f"{who} (window)"]
                    log.info("step_left", step=res.step, reason="window")
                    continue
                if self.hooks.now_of is not None:
                    now = self.hooks.now_of(res.step)
                else:
                    now = self.hooks.clock() if self.hooks.clock is not None else request.now
                failed = not self._step(step, res, teams, now)
            run.finished_at = self.stamp()
            run.pattern_lags_s = [x for plans in self.result.plans.values() for p in plans for x in p.pattern_lags()]
            if self.hooks.instruments is not None and not request.dry_run:
                self.hooks.instruments.pattern_lags(request.trigger, run.pattern_lags_s)
            if not request.dry_run:
                self._close()
            log.info(
                "night_finished",
                ok=self.result.ok,
                steps=",".join(f"{s.step}:{s.status}" for s in run.steps),
                dry_run=request.dry_run,
                llm_calls=sum(s.llm_calls for s in run.steps),
            )
            return self.result

    def _prepare(self) -> None:
        """Before a real night: repair drift, record the run, finish what a crashed run left half-applied."""
        # Only this night's teams: another replica may be half-way through a step of any other team.
        mine = self.request.teams
        with self.hooks.quiet():
            drift = reconcile(
                self.graph,
                self.services.vectors,
                repair=True,
                now=self.request.now,
                teams=mine,
                floor=self.services.settings.distill.confidence_floor,
            )
        self.result.repaired_drift = drift.repaired
        if self.hooks.instruments is not None:
            self.hooks.instruments.drift_items.inc(drift.drift)
        self.result.quarantined = drift.quarantined
        run = self.result.run
        if run.slot is not None and run.team is not None:  # a team job: its night's earlier jobs spent too
            b = self.services.settings.llm.night_budget
            # The whole night's ledger only when the night has a limit: it grows with the teams.
            if b.calls is not None or b.tokens is not None:
                self.gate.seed(self.graph.slot_runs(run.slot), run.team)
            elif b.team_calls is not None or b.team_tokens is not None:
                self.gate.seed(self.graph.slot_runs(run.slot, run.team), run.team)
        run.sizes_before = store_sizes(self.graph, self.services.vectors, run.team)
        self._save()
        # Before anything plans: finish what a crashed run left half-applied, from its journal.
        for team in mine if mine is not None else self.graph.teams():
            for step in ORDER:
                if step.resume is not None and step.resume(self.context(team, self.request.now)) is not None:
                    self.result.resumed.append(f"{step.name}:{team}")

    def _step(self, step: Step[Any, Any], res: StepResult, teams: Sequence[str], now: datetime) -> bool:
        """One step for every team, recorded in ``res`` (and the ledger); False when it did not succeed."""
        dry_run = self.request.dry_run
        res.status = "running"
        res.started_at = self.stamp()
        if not dry_run:
            self._save()  # ops can see which step is in flight
        t0 = time.perf_counter()
        # This job's calls only: the process's concurrent team jobs share the provider (and its usage).
        job_usage = usage_scope()
        used = job_usage.__enter__()
        try:
            for team in teams:
                ctx = self.context(team, now)
                plan: Plan = step.plan(ctx)
                if dry_run:
                    ctx.pending_patterns.update({x.id: x for x in plan.written_patterns()})
                self.result.plans.setdefault(step.name, []).append(plan)
                counts = plan.counts() if dry_run else step.write(ctx, plan)
                if not dry_run:
                    for key, notes in plan.notes().items():
                        self.result.notes.setdefault(key, []).extend(notes)
                # Items the step could not read were skipped; set aside for good, the night goes on.
                found = settle(self.graph, ctx.vectors, now, dry_run=dry_run)
                if found:
                    counts = {**counts, "quarantined": len(found)}
                crashpoint(f"pipeline.after_{step.name}")
                for k, v in counts.items():
                    res.counts[k] = res.counts.get(k, 0) + int(v)
                self._estimated(res, plan)
            res.status = "deferred" if res.deferred else "ok"
        except Abandoned as exc:
            res.status = "abandoned"
            res.error = str(exc)
            log.warning("step_abandoned", step=step.name, reason=str(exc))
        except KeyboardInterrupt:
            # Ctrl-C (or run-once's SIGTERM): the ledger says so, not "running" forever.
            res.status = "abandoned"
            res.error = "interrupted (Ctrl-C or SIGTERM)"
            log.warning("step_abandoned", step=step.name, reason="interrupted")
            raise
        except Exception as exc:  # a failed step stops the night; the ledger still records it
            if isinstance(exc, NoUsableAnswers):  # applied what it could: its counts say what
                for k, v in exc.counts.items():
                    res.counts[k] = res.counts.get(k, 0) + int(v)
            res.status = "failed"
            res.error = f"{type(exc).__name__}: {exc}"[:500]
            log.error("step_failed", step=step.name, error=res.error)
        finally:
            res.finished_at = self.stamp()
            elapsed = time.perf_counter() - t0
            if self.hooks.instruments is not None and not dry_run:
                self.hooks.instruments.step_duration.labels(step.name, res.status).observe(elapsed)
            job_usage.__exit__(None, None, None)
            _usage_delta(res, used)
            if step.prompt is not None:  # the judging steps: which prompt judged
                res.prompt_ids = [self.llm.prompt_ids[step.prompt]]
            log.info(
                "step_finished",
                step=step.name,
                status=res.status,
                duration_s=round(elapsed, 3),
                dry_run=dry_run,
                **res.counts,
            )
            if not dry_run:
                self._save()
        return res.status in STEP_DONE

    def _estimated(self, res: StepResult, plan: Plan) -> None:
        """The plan's pre-flight estimate's cost and what it deferred, into the ledger (and the counter)."""
        cost = plan.estimate_cost()
        if cost is not None:
            res.estimate_cost_usd = round((res.estimate_cost_usd or 0.0) + cost, 6)
        left = plan.deferral()
        if left is not None:
            res.deferred.append(left.line())
            log.warning("step_deferred", step=res.step, team=left.team, groups=left.groups, reason=left.reason)
            if self.hooks.instruments is not None and not self.request.dry_run:
                self.hooks.instruments.deferred_groups.labels(res.step, left.reason).inc(left.groups)

    def _close(self) -> None:
        """After a real night: the memory index rebuilt (when it succeeded), the sizes, the ledger."""
        run, s = self.result.run, self.services
        if self.result.ok:
            # What the bot loads into its prompts: rebuilt after every successful run.
            run.memory_index_entries = rebuild_memory(s.graph, s.settings, self.request.teams)
        try:
            run.sizes_after = store_sizes(s.graph, s.vectors, run.team)
        except StoreError as exc:
            if self.result.ok:
                raise
            # A store that failed the step fails this too; the step's error is the news.
            log.warning("sizes_after_unavailable", error=str(exc)[:300])
        self._save()

    def _save(self) -> None:
        """The run into the ledger, and its new state to the night's jobs (a team job's)."""
        self.graph.save_run(self.result.run)
        if self.hooks.jobs is not None:
            self.hooks.jobs.report(self.result.run)


def store_sizes(graph: GraphStore, vectors: VectorStore, team: str | None = None) -> dict[str, int]:
    """What ops watch grow: it must be linear in patterns, not in messages. With ``team``, that team's
    share only (a team job's ledger entry: its cost does not grow with the number of teams); a
    night's sizes are its teams' summed (``nights.merge_runs``)."""
    if team is not None:
        return graph.counts(team).sizes() | {
            "vectors_episodes": vectors.count(team, "episodes"),
            "vectors_patterns": vectors.count(team, "patterns"),
        }
    by_team = vectors.counts().values()
    return graph.counts().sizes() | {
        "vectors_episodes": sum(kinds.get("episodes", 0) for kinds in by_team),
        "vectors_patterns": sum(kinds.get("patterns", 0) for kinds in by_team),
    }


def teams_sizes(graph: GraphStore, vectors: VectorStore, teams: Collection[str] | None) -> dict[str, int]:
    """``store_sizes`` of every team (None), or of ``teams`` summed (a one-team admin's status)."""
    if teams is None:
        return store_sizes(graph, vectors)
    total: dict[str, int] = {}
    for team in sorted(teams):
        for k, v in store_sizes(graph, vectors, team).items():
            total[k] = total.get(k, 0) + v
    return total


def _usage_delta(res: StepResult, used: LLMUsage) -> None:
    res.llm_calls = used.calls
    res.prompt_tokens = used.prompt_tokens
    res.completion_tokens = used.completion_tokens
    res.cost_usd = None if used.cost_usd is None else round(used.cost_usd, 6)
