"""The budgeted ask-in-rounds loop distill and reflect share, on plain data: what goes in one go, the
rounds of ``width`` calls, the first batch the gate holds back ending the asking, free requests riding
with the first round, the window, and what the gate is charged."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from taskzilla_sleep.core.settings import NightBudget
from taskzilla_sleep.llm.base import LLMUsage
from taskzilla_sleep.night.budget import Estimate, Gate, ask_in_rounds
from tests.unit.steps.conftest import NIGHT

REQUESTS = [f"r{i}" for i in range(7)]
BATCHES = [[3, 4], [0], [1, 2], [5]]  # asking order, as a step would batch them; 6 is in no batch (free)


class Recorder:
    """The provider's ``*_many``: one list of requests a round, answered in order."""

    def __init__(self) -> None:
        self.rounds: list[list[str]] = []

    def __call__(self, asked: list[str]) -> Sequence[str]:
        self.rounds.append(list(asked))
        return [f"answer to {r}" for r in asked]


def cost(batch: list[str]) -> Estimate:
    return Estimate(groups=len(batch), calls=1, prompt_tokens=100 * len(batch), completion_tokens=10)


def gate(budget: NightBudget, deadline_in: timedelta | None = None) -> Gate:
    return Gate(budget, LLMUsage(), lambda: NIGHT, None if deadline_in is None else NIGHT + deadline_in)


def test_without_a_gate_that_can_stop_anything_every_request_goes_in_one_go_in_their_order() -> None:
    for g in (None, gate(NightBudget())):
        ask = Recorder()
        got, reason = ask_in_rounds(g, "t", REQUESTS, ask, batches=BATCHES, cost=cost, width=1, free=[6])
        assert ask.rounds == [REQUESTS] and reason is None
        assert got == {i: f"answer to {r}" for i, r in enumerate(REQUESTS)}
    ask = Recorder()
    assert ask_in_rounds(gate(NightBudget(calls=1)), "t", [], ask, batches=[], cost=cost, width=2) == ({}, None)
    assert ask.rounds == []  # nothing to ask: no call


def test_rounds_of_width_calls_until_the_gate_holds_a_batch_back_which_ends_the_asking() -> None:
    g, ask = gate(NightBudget(calls=3)), Recorder()
    got, reason = ask_in_rounds(g, "t", REQUESTS, ask, batches=BATCHES, cost=cost, width=2, free=[6])
    # Round 1: two calls, the free request first; round 2: the gate lets one call of two through.
    assert ask.rounds == [["r6", "r3", "r4", "r0"], ["r1", "r2"]]
    assert reason == "budget: calls" and sorted(got) == [0, 1, 2, 3, 4, 6]
    assert got[3] == "answer to r3"
    # Charged the estimate of what was asked (a provider that counts nothing): 3 calls, the free one nothing.
    tokens = sum(cost([REQUESTS[i] for i in b]).tokens for b in BATCHES[:3])
    assert g.spent("t") == ((3, tokens), (3, tokens))


def test_everything_that_fits_is_asked_and_no_reason_is_given() -> None:
    g, ask = gate(NightBudget(calls=10)), Recorder()
    got, reason = ask_in_rounds(g, "t", REQUESTS, ask, batches=BATCHES, cost=cost, width=3, free=[6])
    assert ask.rounds == [["r6", "r3", "r4", "r0", "r1", "r2"], ["r5"]]
    assert reason is None and sorted(got) == list(range(7))
    assert g.spent("t")[1][0] == 4


def test_a_first_batch_held_back_asks_nothing_not_even_the_free_requests() -> None:
    ask = Recorder()
    got, reason = ask_in_rounds(
        gate(NightBudget(tokens=50)), "t", REQUESTS, ask, batches=BATCHES, cost=cost, width=2, free=[6]
    )
    assert (got, reason, ask.rounds) == ({}, "budget: tokens", [])


def test_past_the_window_nothing_is_asked_even_when_only_free_requests_remain() -> None:
    late = gate(NightBudget(), deadline_in=timedelta(0))
    ask = Recorder()
    assert ask_in_rounds(late, "t", REQUESTS, ask, batches=BATCHES, cost=cost, width=2, free=[6]) == ({}, "window")
    assert ask_in_rounds(late, "t", ["x"], ask, batches=[], cost=cost, width=2, free=[0]) == ({}, "window")
    assert ask.rounds == []


def test_free_requests_alone_are_asked_at_no_cost_within_a_budget() -> None:
    g, ask = gate(NightBudget(calls=0)), Recorder()
    got, reason = ask_in_rounds(g, "t", ["x", "y"], ask, batches=[], cost=cost, width=2, free=[1, 0])
    assert ask.rounds == [["y", "x"]] and got == {1: "answer to y", 0: "answer to x"} and reason is None
    assert g.spent("t") == ((0, 0), (0, 0))
