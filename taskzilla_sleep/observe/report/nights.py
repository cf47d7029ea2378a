"""One night of the ledger as ops compare it night to night: the figures of each step and of the night.

Plain data built from the ledger's runs, nothing read from a store and nothing rendered: the health
rules (``signals``), the report (``model``) and the metrics scrape all start from these. A scheduled
night is many runs (one per team job, all with the night's slot): ``ledger_nights`` merges them into
one (``taskzilla_sleep.night.ledger.group_nights``); a run with no slot (run-once, watchdog) is a night alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from taskzilla_sleep.core.models import STEP_DONE, Run, RunTrigger, StepName, StepResult, StepStatusName, Time
from taskzilla_sleep.night.jobs import deferred_lines
from taskzilla_sleep.night.ledger import group_nights

NightStatus = Literal["ok", "failed", "incomplete"]

# Which step count feeds which per-night column (step, key in StepResult.counts). The text view's
# per-night table follows this order.
COUNT_KEYS: dict[str, tuple[StepName, str]] = {
    "patterns_added": ("distill", "patterns_added"),
    "evidence_bumps": ("distill", "evidence_bumps"),
    "merges": ("reflect", "merges"),
    "contradictions_opened": ("reflect", "contradictions"),
    "absorbed": ("distill", "absorbed"),
    "retired": ("decay", "retired"),
    "pruned": ("prune", "pruned"),
}


class StepFigures(BaseModel):
    step: StepName
    status: StepStatusName
    duration_s: float | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None
    deferred: list[str] = Field(default_factory=list)  # per team: what the budget or the window left


class Night(BaseModel):
    """One night of the ledger (its team jobs' runs merged, or one run), flattened into what ops
    compare night to night. ``run_id``: the run's id, or ``night_<slot>`` for merged team jobs."""

    run_id: str
    trigger: RunTrigger
    now: Time
    slot: str | None = None
    started_at: Time
    finished_at: Time | None = None
    status: NightStatus
    steps: list[StepFigures] = Field(default_factory=list)
    patterns_added: int = 0
    evidence_bumps: int = 0
    merges: int = 0
    contradictions_opened: int = 0
    absorbed: int = 0
    retired: int = 0
    pruned: int = 0
    duration_s: float | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: at least one call's cost is unknown (unmapped model)
    sizes_before: dict[str, int] = Field(default_factory=dict)
    sizes_after: dict[str, int] = Field(default_factory=dict)
    lags_s: list[float] = Field(default_factory=list)  # availability lag of each pattern this run created
    lag_p50_s: float | None = None
    lag_p95_s: float | None = None
    memory_index_entries: int | None = None  # the index after the night, summed over its teams

    def step(self, name: StepName) -> StepFigures | None:
        return next((s for s in self.steps if s.step == name), None)

    def ran(self, name: StepName) -> bool:
        s = self.step(name)
        return s is not None and s.status in STEP_DONE

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def deferred(self) -> list[str]:
        """What the night's budget or window left for the next night (step, team, groups, why)."""
        return deferred_lines(self.steps)

    def size(self, key: str) -> int | None:
        """A store size after the run; live episode vectors fall back to the graph's live episodes."""
        if key == "vectors_episodes" and key not in self.sizes_after:
            key = "episodes_live"
        return self.sizes_after.get(key)


def ledger_nights(runs: Sequence[Run], n: int | None = None) -> list[Night]:
    """The ledger's runs (``graph.night_runs``) as nights, oldest first; with ``n``, the newest ``n``."""
    nights = [night_of(r) for r in group_nights(runs)]
    return nights if n is None else nights[-n:] if n > 0 else []


def night_of(run: Run) -> Night:
    steps = [_step_figures(s) for s in run.steps]
    by = {s.step: s for s in steps}
    counts = {col: by[step].counts.get(key, 0) if step in by else 0 for col, (step, key) in COUNT_KEYS.items()}
    failed = any(s.status == "failed" for s in steps)
    finished = run.finished_at is not None and all(s.status in ("ok", "deferred", "skipped", "failed") for s in steps)
    status: NightStatus = "failed" if failed else "ok" if finished else "incomplete"
    costs = [s.cost_usd for s in steps]
    return Night(
        run_id=run.id,
        trigger=run.trigger,
        now=run.now,
        slot=run.slot,
        started_at=run.started_at,
        finished_at=run.finished_at,
        status=status,
        steps=steps,
        duration_s=_seconds(run.started_at, run.finished_at),
        llm_calls=sum(s.llm_calls for s in steps),
        prompt_tokens=sum(s.prompt_tokens for s in steps),
        completion_tokens=sum(s.completion_tokens for s in steps),
        # One unknown step cost makes the night's cost unknown: a partial sum would under-report.
        cost_usd=None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6),
        # A run of one team (a watchdog distill) recorded that team's sizes: not the store's.
        sizes_before=dict(run.sizes_before) if run.team is None else {},
        sizes_after=dict(run.sizes_after) if run.team is None else {},
        lags_s=list(run.pattern_lags_s),
        lag_p50_s=percentile(run.pattern_lags_s, 50),
        lag_p95_s=percentile(run.pattern_lags_s, 95),
        memory_index_entries=run.memory_index_entries,
        **counts,
    )


def _step_figures(s: StepResult) -> StepFigures:
    return StepFigures(
        step=s.step,
        status=s.status,
        duration_s=_seconds(s.started_at, s.finished_at),
        counts=dict(s.counts),
        llm_calls=s.llm_calls,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        cost_usd=s.cost_usd,
        error=s.error,
        deferred=list(s.deferred),
    )


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else round((b - a).total_seconds(), 3)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
