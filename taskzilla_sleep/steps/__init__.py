"""The four nightly steps, in the cycle order ``models.STEP_NAMES`` declares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskzilla_sleep.models import STEP_NAMES, StepName
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


_STEPS: dict[StepName, Step] = {
    "prune": Step("prune", prune.plan, prune.apply),
    "distill": Step("distill", distill.plan, distill.apply, distill.resume),
    "reflect": Step("reflect", reflect.plan, reflect.apply),
    "decay": Step("decay", decay.plan, decay.apply),
}
ORDER: tuple[Step, ...] = tuple(_STEPS[name] for name in STEP_NAMES)

__all__ = ["ORDER", "STEP_NAMES", "Plan", "Step", "StepContext"]
