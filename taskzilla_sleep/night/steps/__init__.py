"""The four nightly steps, in the cycle order ``models.STEP_NAMES`` declares.

Each step module has ``read(ctx) -> Inputs`` (every store, embedder and model read), a pure
``decide(inputs, settings, now) -> Plan`` and ``write(ctx, plan) -> counts``; distill also has
``resume`` (it writes through a journal). The runner (``pipeline.py``) uses them only through
``ORDER``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from taskzilla_sleep.core.models import STEP_NAMES, StepName
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.night.steps import decay, distill, prune, reflect
from taskzilla_sleep.night.steps.base import Plan, StepContext

I = TypeVar("I")  # noqa: E741 - the inputs a step reads
P = TypeVar("P", bound=Plan)


@dataclass(frozen=True)
class Step(Generic[I, P]):
    name: StepName
    read: Callable[[StepContext], I]
    decide: Callable[[I, Settings, datetime], P]
    write: Callable[[StepContext, P], dict[str, int]]
    # Finishes what a crashed run of this step left half-applied (from its journal), before any
    # step of the next run plans. None: the step's writes converge by simply rerunning it.
    resume: Callable[[StepContext], dict[str, int] | None] | None = None
    prompt: Literal["distill", "reflect"] | None = None  # the model prompt that judges its questions

    def plan(self, ctx: StepContext) -> P:
        return self.decide(self.read(ctx), ctx.settings, ctx.now)


_STEPS: dict[StepName, Step[Any, Any]] = {
    "prune": Step("prune", prune.read, prune.decide, prune.write),
    "distill": Step("distill", distill.read, distill.decide, distill.write, distill.resume, prompt="distill"),
    "reflect": Step("reflect", reflect.read, reflect.decide, reflect.write, prompt="reflect"),
    "decay": Step("decay", decay.read, decay.decide, decay.write),
}
ORDER: tuple[Step[Any, Any], ...] = tuple(_STEPS[name] for name in STEP_NAMES)

__all__ = ["ORDER", "Plan", "Step", "StepContext"]
