"""The run ledger as nights: a scheduled night's team jobs merged into one run (the chat summary, the
report, the metrics, the status), when a night's next step slot comes. Pure; which of a night's team
steps are done, in flight, deferred or due is ``jobs.NightJobs``'s answer, read here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from taskzilla_sleep.core.models import STEP_DONE, STEP_NAMES, Run, StepName, StepResult, iso_time
from taskzilla_sleep.night.jobs import NightJobs


def next_slot(slot_of: Callable[[StepName], datetime], now: datetime) -> datetime | None:
    """The night's next step slot after ``now`` (when a job may become due), if any is left."""
    later = [t for t in (slot_of(s) for s in STEP_NAMES) if t > now]
    return min(later) if later else None


# A step's status over a night's teams: the worst of them (a team's status is its last attempt's, or
# its first done one: ok, or deferred once the budget or the window stopped it).
_STATUS_RANK = {"ok": 0, "deferred": 1, "skipped": 2, "pending": 3, "running": 4, "abandoned": 5, "failed": 6}


def night_key(run: Run) -> str:
    """Which night a run belongs to: its slot (every team job of a scheduled night), else the run itself
    (a run-once, a watchdog distill)."""
    return run.slot if run.slot is not None else f"run:{run.id}"


def group_nights(runs: Sequence[Run]) -> list[Run]:
    """The runs as nights, oldest first: the team jobs of one slot merged into one (``merge_runs``); a
    run with no slot, or the one run over every team of a slot (before team jobs), as it is. Dry runs
    are left out."""
    groups: dict[str, list[Run]] = {}
    for run in sorted((r for r in runs if not r.dry_run), key=lambda r: (r.started_at, r.id)):
        groups.setdefault(night_key(run), []).append(run)
    nights = [
        merge_runs(group, group[0].slot)
        if group[0].slot is not None and (len(group) > 1 or group[0].team)
        else group[0]
        for group in groups.values()
    ]
    return sorted(nights, key=lambda r: (r.started_at, r.id))


def merge_runs(runs: Sequence[Run], slot: str) -> Run:
    """The night of ``slot`` as one run, from its team jobs' runs (the chat summary, the report, the
    metrics): per step, the counts, LLM use and times of every team's attempts; the night's step is the
    worst of its teams' states (``NightJobs.finals``: deferred after ok), with every team's deferred lines
    and what they left pending (``deferred_groups``: each team's state, not its attempts summed). The
    night is unfinished (``finished_at`` None) while ``NightJobs.open``."""
    real = sorted((r for r in runs if not r.dry_run), key=lambda r: (r.started_at, r.id))
    if not real:
        raise ValueError(f"no run recorded for night {slot}")
    jobs = NightJobs(slot, real)
    steps: list[StepResult] = []
    for name in STEP_NAMES:
        parts = [s for r in real for s in r.steps if s.step == name]
        if not parts:
            continue
        finals = jobs.finals(name)
        worst = max(finals, key=lambda s: _STATUS_RANK[s.status])
        merged = StepResult(step=name, status=worst.status, error=worst.error)
        merged.deferred = [line for s in finals for line in s.deferred]
        for part in parts:
            for k, v in part.counts.items():
                merged.counts[k] = merged.counts.get(k, 0) + v
            merged.llm_calls += part.llm_calls
            merged.prompt_tokens += part.prompt_tokens
            merged.completion_tokens += part.completion_tokens
        if any("deferred_groups" in s.counts for s in parts):  # what is left pending: each team's state
            merged.counts["deferred_groups"] = jobs.deferred_groups(name)
        costs = [s.cost_usd for s in parts]
        merged.cost_usd = None if None in costs else round(sum(c for c in costs if c is not None), 6)
        starts = [s.started_at for s in parts if s.started_at is not None]
        ends = [s.finished_at for s in parts if s.finished_at is not None]
        merged.started_at = min(starts) if starts else None
        merged.finished_at = max(ends) if ends else None
        steps.append(merged)
    open_ = jobs.open
    closed = [r for r in real if r.finished_at is not None]
    last = max(closed, key=lambda r: (r.finished_at, r.id)) if closed else None
    before, after = night_sizes(real)
    return Run(
        id=f"night_{slot}",
        trigger=real[0].trigger,
        started_at=real[0].started_at,
        finished_at=None if open_ or last is None else last.finished_at,
        now=min(r.now for r in real),
        steps=steps,
        slot=slot,
        sizes_before=before,
        sizes_after=after,
        pattern_lags_s=[x for r in real for x in r.pattern_lags_s],
        memory_index_entries=_index_entries(real),
    )


def night_sizes(runs: Sequence[Run]) -> tuple[dict[str, int], dict[str, int]]:
    """A night's store sizes (before, after) from its runs, oldest first. Team jobs record their own
    team's sizes: the night's are the sum over its teams of each team's first sizes before and its
    last finished job's sizes after (a team with none finished yet: its sizes before, nothing changed
    that was recorded). A run over every team (a night from before team jobs) recorded the whole store."""
    if any(r.team is None for r in runs):
        closed = [r for r in runs if r.finished_at is not None]
        last = max(closed, key=lambda r: (r.finished_at or r.started_at, r.id)) if closed else None
        return dict(runs[0].sizes_before), dict(last.sizes_after) if last is not None else {}
    first: dict[str, dict[str, int]] = {}
    latest: dict[str, dict[str, int]] = {}
    for r in runs:
        assert r.team is not None
        first.setdefault(r.team, r.sizes_before)
        if r.finished_at is not None and r.sizes_after:
            latest[r.team] = r.sizes_after
    return _summed(first.values()), _summed(latest.get(team, sizes) for team, sizes in first.items())


def _summed(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for sizes in parts:
        for k, v in sizes.items():
            total[k] = total.get(k, 0) + v
    return total


def _index_entries(runs: Sequence[Run]) -> int | None:
    """The memory index after the night: each team's job rebuilds that team's part, so the newest size
    each team (or a run over every team) recorded, summed."""
    latest: dict[str | None, int] = {}
    for r in runs:  # oldest first: a later run of the same team replaces an earlier one
        if r.memory_index_entries is not None:
            latest[r.team] = r.memory_index_entries
    return sum(latest.values()) if latest else None


def _steps(r: Run) -> dict[str, Any]:
    return {
        x.step: {"status": x.status, "started_at": iso_time(x.started_at) if x.started_at else None} for x in r.steps
    }


def run_status(r: Run) -> dict[str, Any]:
    """A run for the status: what ran, for which team, and each step's state."""
    ok = all(x.status in STEP_DONE for x in r.steps)
    return {
        "id": r.id,
        "trigger": r.trigger,
        "slot": r.slot,
        "now": iso_time(r.now),
        "team": r.team,
        "ok": ok,
        "steps": _steps(r),
    }


def night_status(night: Run, runs: list[Run]) -> dict[str, Any]:
    """A night for the status: its merged steps, each team job's run (what ran where, when), and of a
    scheduled night each team's job state (``NightJobs``: done, in flight, left, deferred)."""
    jobs = NightJobs(night.slot, runs) if night.slot is not None else None
    return {
        "slot": night.slot,
        "trigger": night.trigger,
        "finished": night.finished_at is not None,
        "ok": night.finished_at is not None and all(x.status in STEP_DONE for x in night.steps),
        "steps": _steps(night),
        "jobs": [{"id": r.id, "team": r.team, "steps": _steps(r)} for r in runs],
        "teams": {
            team: {
                "done": jobs.done(team),
                "in_flight": jobs.in_flight(team),
                "left": jobs.left(team),
                "deferred": jobs.deferred(team=team),
            }
            for team in jobs.teams
        }
        if jobs is not None
        else {},
    }
