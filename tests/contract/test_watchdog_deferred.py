"""The watchdog takes what a night's budget deferred (issue 15: "taken first the next night or by the
watchdog"), through the worker's own watchdog loop, litellm over real HTTP (the stub plays the model),
FalkorDB and Chroma: passes in the day, each under the night budget, finish the deferred groups; the
patterns equal an unbudgeted night's; the next night asks nothing again; nothing is half-applied."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.settings import NightBudget, WatchdogSettings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.budget import Deferral
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.steps.distill import last_deferral
from taskzilla_sleep.night.watchdog import watchdog_pass
from tests.contract.test_cycle import NIGHT, TEAM, Stack
from tests.contract.test_cycle_litellm import _provider, good_model
from tests.contract.test_night_budget import NEXT, _budgeted, _consistent, _night, _patterns, stacks
from tests.llm_stub import LLMStub
from tests.unit.test_team_nights import HandClock

__all__ = ["stacks"]  # the fixture, shared with the night budget's tests

DAY = NIGHT + timedelta(hours=7)  # 10:05, long after the cooldown


def _worker(stack: Stack, url: str, clock: HandClock) -> Worker:
    settings = stack.settings.model_copy(update={"watchdog": WatchdogSettings(cooldown_minutes=30)})
    services = Services(settings, stack.graph, stack.vectors, stack.embedder, _llm=_provider(url))
    return Worker(services, clock, serve_api=False)


def test_watchdog_passes_in_the_day_finish_what_the_budget_deferred(stacks: list[Stack]) -> None:
    stack, ref = stacks
    # The sample week is three topics here (``stacks``): a budget of one call leaves two for the day.
    stack = _budgeted(stack, NightBudget(calls=1))
    stack.ingest_sample()
    with LLMStub(default=good_model) as stub:
        night = _night(stack, stub.url, NIGHT)
    d = night.run.steps[1]
    assert night.ok and d.status == "deferred"
    left = d.counts["deferred_groups"]
    assert left >= 2 and last_deferral(stack.graph, TEAM) == Deferral(TEAM, left, "budget: calls")
    s = stack.settings.watchdog
    assert watchdog_pass(stack.graph, TEAM, NIGHT + timedelta(minutes=20), s) is None  # the cooldown holds
    due = watchdog_pass(stack.graph, TEAM, DAY, s)
    assert due is not None and due.deferred == Deferral(TEAM, left, "budget: calls")
    assert due.request(DAY, s).lookback is None  # the whole distill window: the deferred groups are older
    off = s.model_copy(update={"take_deferred": False})
    assert watchdog_pass(stack.graph, TEAM, DAY, off) is None  # nothing new since the night: not due

    clock = HandClock(DAY)
    passes = []
    with LLMStub(default=good_model) as stub:
        worker = _worker(stack, stub.url, clock)
        try:
            while watchdog_pass(stack.graph, TEAM, clock.t, s) is not None and len(passes) < 10:
                worker._watchdog()
                (run,) = [r for r in stack.graph.runs(20) if r.trigger == "watchdog" and r.id not in passes]
                passes.append(run.id)
                assert run.team == TEAM and [x.step for x in run.steps] == ["distill"]
                assert run.steps[0].llm_calls <= 1  # each pass under the night budget
                clock.t += timedelta(minutes=31)
        finally:
            worker._shutdown()
    assert len(passes) == left  # one group a pass, oldest first, until none is left
    assert last_deferral(stack.graph, TEAM) is None
    assert watchdog_pass(stack.graph, TEAM, clock.t + timedelta(hours=1), s) is None
    _consistent(stack)

    # What an unbudgeted night over the same week learns (before its reflect judges it: the passes only
    # distill, reflect comes with the next night), and after the next night.
    ref.ingest_sample()
    with LLMStub(default=good_model) as stub:
        first = run_night(replace(ref, llm=_provider(stub.url)), NightRequest(now=NIGHT, steps=["prune", "distill"]))
        learnt = _patterns(ref)
        rest = run_night(replace(ref, llm=_provider(stub.url)), NightRequest(now=NIGHT, steps=["reflect", "decay"]))
        second = _night(ref, stub.url, NEXT)
    assert first.ok and rest.ok and second.ok and not first.deferred
    assert len(learnt) >= 4 and _patterns(stack) == learnt

    # The passes marked what they asked: the next night asks distill nothing again, and ends where
    # the unbudgeted pair of nights ends.
    with LLMStub(default=good_model) as stub:
        following = _night(stack, stub.url, NEXT)
    assert following.ok and following.run.steps[1].llm_calls == 0
    _consistent(stack)
    assert _patterns(stack) == _patterns(ref)
