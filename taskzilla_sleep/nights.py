"""A scheduled night as team jobs: which of each team's steps are done (from the run ledger that
every replica shares) and which are due now. Pure decisions; the worker claims and runs the jobs.

A job is one team's next steps that are not done yet, in cycle order, as far as their slots have
passed: a replica never holds a team while it waits for a slot, and a step never starts before its
slot nor before the team's previous step finished (it is only in a job once every step before it
is done, or is in the same job, which runs them in order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from taskzilla_sleep.models import STEP_NAMES, Run, StepName, StepResult


@dataclass(frozen=True)
class TeamJob:
    team: str
    steps: tuple[StepName, ...]


def done_steps(runs: Sequence[Run]) -> dict[str | None, set[StepName]]:
    """Per team, the steps these runs (of one slot) finished ok; key None: runs over every team
    (a night from before team jobs), which count for each team."""
    done: dict[str | None, set[StepName]] = {}
    for run in runs:
        if run.dry_run:
            continue
        done.setdefault(run.team, set()).update(s.step for s in run.steps if s.status == "ok")
    return done


def steps_left(done: dict[str | None, set[StepName]], team: str) -> list[StepName]:
    finished = done.get(team, set()) | done.get(None, set())
    return [s for s in STEP_NAMES if s not in finished]


def due_jobs(
    teams: Sequence[str], runs: Sequence[Run], slot_of: Callable[[StepName], datetime], now: datetime
) -> tuple[list[TeamJob], bool]:
    """(the jobs due at ``now``, whether every team's night is done)."""
    done = done_steps(runs)
    jobs: list[TeamJob] = []
    complete = True
    for team in teams:
        left = steps_left(done, team)
        if not left:
            continue
        complete = False
        due: list[StepName] = []
        for step in left:
            if slot_of(step) > now:
                break
            due.append(step)
        if due:
            jobs.append(TeamJob(team, tuple(due)))
    return jobs, complete


def next_slot(slot_of: Callable[[StepName], datetime], now: datetime) -> datetime | None:
    """The night's next step slot after ``now`` (when a job may become due), if any is left."""
    later = [t for t in (slot_of(s) for s in STEP_NAMES) if t > now]
    return min(later) if later else None


def merge_runs(runs: Sequence[Run], slot: str) -> Run:
    """The night of ``slot`` as one run, from its team jobs' runs (for the chat summary): per step, the
    counts, LLM use and times of every team's attempts; ``ok`` once some attempt of it succeeded."""
    real = [r for r in runs if not r.dry_run]
    if not real:
        raise ValueError(f"no run recorded for night {slot}")
    steps: list[StepResult] = []
    for name in STEP_NAMES:
        parts = [s for r in real for s in r.steps if s.step == name]
        if not parts:
            continue
        ok = any(s.status == "ok" for s in parts)
        merged = StepResult(step=name, status="ok" if ok else parts[-1].status, error=None if ok else parts[-1].error)
        for part in parts:
            for k, v in part.counts.items():
                merged.counts[k] = merged.counts.get(k, 0) + v
            merged.llm_calls += part.llm_calls
            merged.prompt_tokens += part.prompt_tokens
            merged.completion_tokens += part.completion_tokens
        costs = [s.cost_usd for s in parts]
        merged.cost_usd = None if None in costs else round(sum(c for c in costs if c is not None), 6)
        starts = [s.started_at for s in parts if s.started_at is not None]
        ends = [s.finished_at for s in parts if s.finished_at is not None]
        merged.started_at = min(starts) if starts else None
        merged.finished_at = max(ends) if ends else None
        steps.append(merged)
    ends = [r.finished_at for r in real if r.finished_at is not None]
    return Run(
        id=f"night_{slot}",
        trigger=real[0].trigger,
        started_at=min(r.started_at for r in real),
        finished_at=max(ends) if ends else None,
        now=min(r.now for r in real),
        steps=steps,
        slot=slot,
        pattern_lags_s=[x for r in real for x in r.pattern_lags_s],
    )
