"""A scheduled night's job state, in one place: per team, which steps are done (ok or deferred), which a
job holds in flight, which were deferred and why, and which are due now. Built from the run ledger
every replica shares (``graph.slot_runs``); the pipeline reports each step's outcome to it as it saves
the run, and the worker, the ledger's merged night (the report, the metrics, the status) and the chat
summary read these answers here instead of each working them out from the runs (as procrastinate's
``JobManager`` owns its jobs' states).

A job is one team's next steps that are not done yet, in cycle order, as far as their slots have
passed: a replica never holds a team while it waits for a slot, and a step never starts before its
slot nor before the team's previous step finished (it is only in a job once every step before it
is done, or is in the same job, which runs them in order).

A team's step may have several attempts in a night (a failed one tried again, a job handed over
after a crash): its state is its first done attempt, else its last one. Runs over every team (key
None: a night from before team jobs) count for each team. Dry runs are not the night's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from taskzilla_sleep.core.models import STEP_DONE, STEP_NAMES, Run, StepName, StepResult
from taskzilla_sleep.stores.ports import GraphStore


@dataclass(frozen=True)
class TeamJob:
    team: str
    steps: tuple[StepName, ...]


class _Deferring(Protocol):
    @property
    def step(self) -> StepName: ...

    @property
    def deferred(self) -> list[str]: ...


def deferred_lines(steps: Iterable[_Deferring]) -> list[str]:
    """What the budget or the window left for the next night, one line per step and team ("distill
    acme: 2 group(s) deferred (budget: calls)"): a run's, a merged night's, a report night's."""
    return [f"{s.step} {line}" for s in steps for line in s.deferred]


@dataclass(frozen=True)
class _View:
    runs: list[Run]
    attempts: dict[str | None, dict[StepName, list[StepResult]]]


class NightJobs:
    """The team jobs of one slot, as the ledger (and this process's own reports) have them."""

    def __init__(self, slot: str, runs: Sequence[Run], teams: Sequence[str] | None = None) -> None:
        self.slot = slot
        self._teams = None if teams is None else list(teams)
        self._lock = threading.Lock()  # team jobs of one process report from their threads
        self._runs: dict[str, Run] = {r.id: r for r in runs if not r.dry_run}
        self._view: _View | None = None  # the runs ordered and indexed, until the next report

    @classmethod
    def read(cls, graph: GraphStore, slot: str, teams: Sequence[str] | None = None) -> NightJobs:
        """The slot's jobs from the ledger: of ``teams`` (one team: only its runs are read), else of
        every team in the graph."""
        if teams is not None and len(teams) == 1:
            return cls(slot, graph.slot_runs(slot, teams[0]), teams)
        return cls(slot, graph.slot_runs(slot), graph.teams() if teams is None else teams)

    # -- what the pipeline reports ------------------------------------------------------------------
    def report(self, run: Run) -> None:
        """A run of this slot as just saved to the ledger (a step started, finished, deferred)."""
        if run.slot != self.slot:
            raise ValueError(f"run {run.id} is of slot {run.slot}, not of night {self.slot}")
        if run.dry_run:
            return
        with self._lock:
            self._runs[run.id] = run.model_copy(deep=True)
            self._view = None

    # -- what the worker, the ledger and the observers read ----------------------------------------
    def _indexed(self) -> _View:
        """The runs oldest first, and per team (None: runs over every team) each step's attempts, oldest
        first: built once per report, so a worker's look at many teams reads the runs once."""
        with self._lock:
            if self._view is None:
                runs = sorted(self._runs.values(), key=lambda r: (r.started_at, r.id))
                attempts: dict[str | None, dict[StepName, list[StepResult]]] = {}
                for run in runs:
                    for s in run.steps:
                        attempts.setdefault(run.team, {}).setdefault(s.step, []).append(s)
                self._view = _View(runs, attempts)
            return self._view

    @property
    def runs(self) -> list[Run]:
        """The night's runs, oldest first."""
        return list(self._indexed().runs)

    @property
    def teams(self) -> list[str]:
        """The night's teams: the ones it was read for, else every team with a job in the ledger."""
        if self._teams is not None:
            return list(self._teams)
        return sorted({r.team for r in self.runs if r.team is not None})

    def finals(self, step: StepName, team: str | None = None) -> list[StepResult]:
        """The step's state for each team that has an attempt (or for ``team``): its first done attempt,
        else its last."""
        return [
            next((s for s in tries if s.status in STEP_DONE), tries[-1])
            for who, by_step in self._indexed().attempts.items()
            if team in (None, who) and (tries := by_step.get(step))
        ]

    def done(self, team: str) -> list[StepName]:
        """The team's steps finished for the slot (ok, or deferred: what the budget or the window left
        waits for the next night, the slot is done), in cycle order."""
        attempts = self._indexed().attempts
        finished = {
            step
            for who in (team, None)
            for step, tries in attempts.get(who, {}).items()
            if any(s.status in STEP_DONE for s in tries)
        }
        return [s for s in STEP_NAMES if s in finished]

    def left(self, team: str) -> list[StepName]:
        """The team's steps not done yet, in cycle order."""
        finished = set(self.done(team))
        return [s for s in STEP_NAMES if s not in finished]

    def in_flight(self, team: str) -> list[StepName]:
        """The team's steps a job holds (its run not finished, the step not done yet): running now, or
        left by a replica that died (until the next attempt, or ``abandon_dead_runs``)."""
        finished = set(self.done(team))
        held = {
            s.step
            for r in self.runs
            if r.team == team and r.finished_at is None
            for s in r.steps
            if s.status in ("pending", "running") and s.step not in finished
        }
        return [s for s in STEP_NAMES if s in held]

    def deferred(self, step: StepName | None = None, team: str | None = None) -> list[str]:
        """What the budget or the window left for the next night (``deferred_lines``): every team's (or
        ``team``'s) state of each step (or of ``step``), a retried step's earlier attempts not counted."""
        names = STEP_NAMES if step is None else (step,)
        return [line for name in names for line in deferred_lines(self.finals(name, team))]

    def deferred_groups(self, step: StepName) -> int:
        """How many groups (distill) or pairs (reflect) the step left pending over its teams: each
        team's state of the step, not the sum of its attempts (a retry asks its earlier attempt's again)."""
        return sum(s.counts.get("deferred_groups", 0) for s in self.finals(step))

    def due(self, team: str, slot_of: Callable[[StepName], datetime], now: datetime) -> tuple[StepName, ...]:
        """The team's job at ``now``: its steps left whose slots have passed, up to the first that has not."""
        steps: list[StepName] = []
        for step in self.left(team):
            if slot_of(step) > now:
                break
            steps.append(step)
        return tuple(steps)

    def due_jobs(self, slot_of: Callable[[StepName], datetime], now: datetime) -> list[TeamJob]:
        """Every team's job due at ``now`` (teams with nothing due left out)."""
        return [TeamJob(team, steps) for team in self.teams if (steps := self.due(team, slot_of, now))]

    @property
    def complete(self) -> bool:
        """Every team's night is done (no step left for any of them)."""
        return not any(self.left(team) for team in self.teams)

    @property
    def open(self) -> bool:
        """A run of the night is not finished, or a team seen in it has steps left: the merged night is
        unfinished (the report says incomplete, the metrics wait for it)."""
        runs = self.runs
        seen = {r.team for r in runs if r.team is not None}
        return any(r.finished_at is None for r in runs) or any(self.left(t) for t in seen)
