"""The four nightly steps. Their order is written here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskzilla_sleep.models import StepName
from taskzilla_sleep.steps import decay, distill, prune, reflect
from taskzilla_sleep.steps.base import Plan, StepContext


@dataclass(frozen=True)
class Step:
    name: StepName
    plan: Callable[[StepContext], Any]
    apply: Callable[[StepContext, Any], dict[str, int]]
    # Finishes what a crashed run of this step left half-applied (from its journal), before any
    # step of the next run plans. None: the step's writes converge by simply rerunning it.
    resume: Callable[[StepContext], dict[str, int] | None] | None = None


# Prune before distill (yesterday's garbage must not shape today's patterns); decay after reflect
# (an episode is not retired before its lesson survived the cross-check).
ORDER: tuple[Step, ...] = (
    Step("prune", prune.plan, prune.apply),
    Step("distill", distill.plan, distill.apply, distill.resume),
    Step("reflect", reflect.plan, reflect.apply),
    Step("decay", decay.plan, decay.apply),
)
STEP_NAMES: tuple[StepName, ...] = tuple(s.name for s in ORDER)

__all__ = ["ORDER", "STEP_NAMES", "Plan", "Step", "StepContext"]
