"""What every step is given (a StepContext) and what it decides (a Plan that describes itself).

A step is three functions: ``read(ctx)`` does every store, embedder and model read and returns the
step's inputs; ``decide(inputs, settings, now)`` is pure and returns its plan; ``write(ctx, plan)``
applies the plan. The runner (``pipeline.py``) knows no step by name: what a dry run or the ledger
needs of a plan, the plan says itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np
import numpy.typing as npt

from taskzilla_sleep.core.errors import LLMError
from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import Pattern
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.llm.base import LLMProvider
from taskzilla_sleep.night.budget import Deferral, Gate
from taskzilla_sleep.stores.ports import Embedder, GraphStore, Retirement, VectorKind, VectorStore

Vector = npt.NDArray[np.float64]


class NoUsableAnswers(LLMError):
    """No question of the step got a usable answer. What could be applied was (the attempt is
    recorded, so the questions are asked again next time); the step fails, as after a 5xx."""

    def __init__(self, message: str, counts: dict[str, int]) -> None:
        super().__init__(message)
        self.counts = counts


class Abandoned(Exception):  # noqa: N818 - a state, not an error: the step was left on purpose
    """The step was left between two batches because the worker is stopping."""


@dataclass
class StepContext:
    team: str
    now: datetime
    settings: Settings
    graph: GraphStore
    vectors: VectorStore
    embedder: Embedder
    llm: LLMProvider
    # Dry runs only: patterns an earlier step of this night would have written, so later steps plan
    # against them (a dry run of the whole cycle shows the contradictions the new patterns open).
    pending_patterns: dict[str, Pattern] = field(default_factory=dict)
    lookback: timedelta | None = None  # a watchdog distill: only this window, the nightly watermark untouched
    should_stop: Callable[[], bool] = lambda: False
    gate: Gate | None = None  # the night's budget and window end (None: distill asks everything)

    def check_stop(self) -> None:
        """Between batches: a worker shutting down abandons the step here (every batch is atomic)."""
        if self.should_stop():
            raise Abandoned(f"{self.team}: shutdown requested")

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return [np.asarray(v, dtype=np.float64) for v in self.embedder.embed(list(texts))] if texts else []

    def vectors_of(self, kind: VectorKind, ids: list[str]) -> dict[str, Vector]:
        """Stored vectors by id; any id without one is embedded from the graph's text (and not stored)."""
        found = {k: np.asarray(v, dtype=np.float64) for k, v in self.vectors.embeddings(self.team, kind, ids).items()}
        pending = [i for i in ids if i not in found and i in self.pending_patterns and kind == "patterns"]
        if pending:
            found.update(zip(pending, self.embed([self.pending_patterns[i].statement for i in pending]), strict=True))
        missing = [i for i in ids if i not in found]
        if missing:
            texts = self.graph.live_texts(self.team, "episode" if kind == "episodes" else "pattern", missing)
            todo = [i for i in missing if i in texts]
            found.update(zip(todo, self.embed([texts[i] for i in todo]), strict=True))
        # In the order asked for, not the order the vector store answered in: callers that scan the
        # result (an argmax keeps the first of equal scores) must decide the same on every backend.
        return {i: found[i] for i in dict.fromkeys(ids) if i in found}


class Plan(Protocol):
    def lines(self) -> list[str]:
        """The plan as a readable diff, one change a line (for --dry-run)."""
        ...

    def counts(self) -> dict[str, int]: ...

    def empty(self) -> bool: ...

    def written_patterns(self) -> list[Pattern]:
        """Patterns this plan writes: in a dry run, the later steps plan against them."""
        ...

    def pattern_lags(self) -> list[float]:
        """Availability lag of each pattern this plan creates (the ledger records them)."""
        ...

    def notes(self) -> dict[str, list[str]]:
        """Report material besides the counts (e.g. stale beliefs), recorded when the plan is applied."""
        ...

    def deferral(self) -> Deferral | None:
        """What the night's budget or window left for the next night, and why (None: nothing)."""
        ...

    def estimate_cost(self) -> float | None:
        """The pre-flight estimate's cost in USD (None: no estimate, or the model has no price)."""
        ...


class PlanBase:
    """What most plans say to the runner: no patterns written, no lags, no notes."""

    def written_patterns(self) -> list[Pattern]:
        return []

    def pattern_lags(self) -> list[float]:
        return []

    def notes(self) -> dict[str, list[str]]:
        return {}

    def deferral(self) -> Deferral | None:
        return None

    def estimate_cost(self) -> float | None:
        return None


RETIRE_BATCH = 500


def retire_episodes(ctx: StepContext, rows: Sequence[Retirement], step: str) -> None:
    """Retire or prune episodes: graph first (status, text dropped, tombstone) in atomic batches,
    then their vectors. A crash in between leaves orphan vectors, which the next prune or reconcile drops."""
    for i in range(0, len(rows), RETIRE_BATCH):
        ctx.check_stop()
        ctx.graph.retire_episodes(rows[i : i + RETIRE_BATCH])
    crashpoint(f"{step}.after_graph")
    if rows:
        ctx.vectors.delete(ctx.team, "episodes", [r.id for r in rows])
