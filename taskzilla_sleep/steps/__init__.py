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


# Prune before distill (yesterday's garbage must not shape today's patterns); decay after reflect
# (an episode is not retired before its lesson survived the cross-check).
ORDER: tuple[Step, ...] = (
    Step("prune", prune.plan, prune.apply),
    Step("distill", distill.plan, distill.apply),
    Step("reflect", reflect.plan, reflect.apply),
    Step("decay", decay.plan, decay.apply),
)
STEP_NAMES: tuple[StepName, ...] = tuple(s.name for s in ORDER)

__all__ = ["ORDER", "STEP_NAMES", "Plan", "Step", "StepContext"]
