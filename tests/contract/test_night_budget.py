"""A budgeted, time-boxed night through litellm over real HTTP (the stub plays the model).

A night over its LLM budget, or past its window's end, stops asking between two batches: what it
asked is written whole, what it did not ask stays pending (nothing half-applied, no drift), the
ledger says deferred and why, and the next night finishes the work and ends in the patterns an
unbudgeted pair of nights ends in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.core.settings import NightBudget, Settings
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, NightResult, run_night
from taskzilla_sleep.night.steps.distill import JOURNAL
from taskzilla_sleep.observe.report.night import render_night, render_plan
from taskzilla_sleep.stores.ports import Embedder
from tests.contract.test_cycle import NIGHT, TEAM, Stack
from tests.contract.test_cycle_litellm import _provider, good_model
from tests.llm_stub import LLMStub

NEXT = NIGHT + timedelta(days=1)


def _stack(path: Path, embedder: Embedder, **llm: Any) -> Stack:
    from taskzilla_sleep.core.settings import load_settings
    from taskzilla_sleep.llm.offline import OfflineProvider
    from taskzilla_sleep.stores.chroma import ChromaVectorStore
    from taskzilla_sleep.stores.falkordb import open_falkordb

    graph = open_falkordb(path / "f")
    graph.ensure_schema()
    vectors = ChromaVectorStore.embedded(path / "c", embedder)
    base: Settings = load_settings(env={"TASKZILLA_DATA_DIR": str(path)})
    # Topics of at most 12 messages: the sample week is three groups (at the default it is one topic,
    # one call), so a budget or a window can stop between two calls, and each habit's messages still
    # share a topic (a smaller cap scatters one, and what is learnt then depends on the grouping).
    distill = base.distill.model_copy(update={"topic_max_messages": 12})
    settings = base.model_copy(update={"llm": base.llm.model_copy(update=llm), "distill": distill})
    return Stack(settings, graph, vectors, embedder, OfflineProvider(embedder))


@pytest.fixture
def stacks(tmp_path: Path, offline_embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Stack]]:
    """Two empty stacks (the one under test, the reference), one group a call, one call a round."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    made = [_stack(tmp_path / n, offline_embedder, batch_groups=1, max_concurrency=1) for n in ("a", "b")]
    yield made
    for s in made:
        s.vectors.close()  # type: ignore[attr-defined]
        s.graph.close()


def _budgeted(stack: Stack, budget: NightBudget) -> Stack:
    llm = stack.settings.llm.model_copy(update={"night_budget": budget})
    return replace(stack, settings=stack.settings.model_copy(update={"llm": llm}))


def _night(stack: Stack, url: str, now: datetime, hooks: NightHooks | None = None) -> NightResult:
    services = replace(stack, llm=_provider(url))
    return run_night(services, NightRequest(now=now), hooks)


def _patterns(stack: Stack) -> list[tuple[str, int, str]]:
    return sorted((p.statement, p.support_count, p.status.value) for p in stack.graph.patterns(TEAM))


def _consistent(stack: Stack) -> None:
    """Nothing half-applied: no journal left open, no drift between the graph and the vectors."""
    assert not stack.graph.get_meta(JOURNAL.format(team=TEAM))
    assert reconcile(stack.graph, stack.vectors, repair=False).drift == 0


def _reference(stack: Stack) -> list[tuple[str, int, str]]:
    """The same two nights without a budget or a window."""
    stack.ingest_sample()
    with LLMStub(default=good_model) as stub:
        first, second = _night(stack, stub.url, NIGHT), _night(stack, stub.url, NEXT)
    assert first.ok and second.ok and not first.deferred and not second.deferred
    got = _patterns(stack)
    assert len(got) >= 4
    return got


def test_a_night_over_its_budget_stops_cleanly_and_the_next_night_finishes(stacks: list[Stack]) -> None:
    stack, ref = stacks
    stack = _budgeted(stack, NightBudget(calls=2))
    stack.ingest_sample()
    pending_before = {e.id for e in stack.graph.episodes_by_status(TEAM, [EpisodeStatus.RAW.value])}
    with LLMStub(default=good_model) as stub:
        first = _night(stack, stub.url, NIGHT)
        distill_calls = sum(1 for b in stub.requests if "Topics asked" in str(b))
    d = first.run.steps[1]
    assert first.ok and d.status == "deferred", [(s.step, s.status, s.error) for s in first.run.steps]
    assert d.llm_calls == 2 == distill_calls  # the budget, not one call more
    # The pre-flight estimate covers every group worth asking; two were asked, the rest deferred.
    assert d.counts["estimate_groups"] == d.counts["deferred_groups"] + 2 >= 3
    assert d.counts["estimate_calls"] == d.counts["estimate_groups"]  # one group a call here
    assert d.counts["estimate_prompt_tokens"] > 0 and d.counts["estimate_completion_tokens"] > 0
    assert d.estimate_cost_usd is None  # "openai/stub" has no price
    assert d.deferred == [
        f"{TEAM}: {d.counts['deferred_groups']} group(s) deferred (budget: calls), taken first next night"
    ]
    # Reflect is budgeted too: the night's two calls are spent, its comparison waits for the next night.
    assert [s.status for s in first.run.steps] == ["ok", "deferred", "deferred", "ok"]
    assert first.run.steps[2].llm_calls == 0 and first.run.steps[2].counts["deferred_groups"] >= 1
    # The ledger says so, and so do run-once's text and the stored run.
    (stored,) = [r for r in stack.graph.runs(5) if r.id == first.run.id]
    assert stored.steps[1].status == "deferred" and stored.steps[1].deferred == d.deferred
    assert "deferred (budget: calls)" in render_night(first, stack.graph)
    _consistent(stack)
    # The deferred groups' new episodes were not marked: the next night reads them as new.
    raw = stack.graph.episodes_by_status(TEAM, [EpisodeStatus.RAW.value])
    left = [e for e in raw if e.id in pending_before and e.distilled_at is None]
    assert left, "the deferred groups' episodes must stay pending"

    stack = _budgeted(stack, NightBudget())
    with LLMStub(default=good_model) as stub:
        second = _night(stack, stub.url, NEXT)
    assert second.ok and second.run.steps[1].status == "ok" and not second.deferred
    _consistent(stack)
    assert _patterns(stack) == _reference(ref)


def test_a_night_past_its_window_defers_the_rest_and_the_next_night_finishes(stacks: list[Stack]) -> None:
    stack, ref = stacks
    stack.ingest_sample()
    clock = [NIGHT + timedelta(minutes=5)]  # the night's clock: each distill call takes 20 minutes of it
    deadline = NIGHT + timedelta(minutes=30)  # window_end 03:25 + 10 minutes of grace

    def slow_model(body: dict[str, Any]) -> str:
        clock[0] += timedelta(minutes=20)
        return good_model(body)

    hooks = NightHooks(clock=lambda: clock[0], deadline=deadline)
    with LLMStub(default=slow_model) as stub:
        first = _night(stack, stub.url, NIGHT, hooks)
    steps = {s.step: s for s in first.run.steps}
    assert first.ok and steps["distill"].status == "deferred"
    assert steps["distill"].llm_calls == 2  # at 03:10 and 03:30 (< 03:35); at 03:50 the window is over
    assert "(window)" in steps["distill"].deferred[0]
    # Past the window reflect is not started (its watermark stays: the next night reflects); decay runs.
    assert steps["reflect"].status == "deferred" and steps["reflect"].llm_calls == 0
    assert steps["decay"].status == "ok"
    assert "window" in render_night(first, stack.graph)
    _consistent(stack)

    with LLMStub(default=good_model) as stub:
        second = _night(stack, stub.url, NEXT)
    assert second.ok and not second.deferred
    _consistent(stack)
    assert _patterns(stack) == _reference(ref)


def test_a_dry_run_prints_the_estimate_and_what_the_budget_would_defer(stacks: list[Stack]) -> None:
    stack, _ = stacks
    stack = _budgeted(stack, NightBudget(team_tokens=1))  # not even one call fits
    stack.ingest_sample()
    with LLMStub(default=good_model) as stub:
        services = replace(stack, llm=_provider(stub.url))
        result = run_night(services, NightRequest(now=NIGHT, dry_run=True))
        assert not [b for b in stub.requests if "Topics asked" in str(b)]  # not one distill call
    d = result.run.steps[1]
    assert d.status == "deferred" and d.llm_calls == 0
    text = render_plan(result)
    groups = d.counts["estimate_groups"]
    assert groups >= 3 and f"= {TEAM} estimate: {groups} group(s), {groups} call(s)" in text  # one group a call
    assert f"{TEAM}: {groups} group(s) deferred (budget: tokens)" in text


def _state(stack: Stack) -> tuple[list[tuple[str, int, str]], list[tuple[str, str, str, str]]]:
    """The patterns and the contradictions (by the statements they oppose, so two stacks compare)."""
    text = {p.id: p.statement for p in stack.graph.patterns(TEAM)}
    opened = sorted(
        (text[c.old_pattern_id], text[c.new_pattern_id], c.kind.value, c.status.value)
        for c in stack.graph.contradictions(TEAM)
    )
    return _patterns(stack), opened


def test_a_night_whose_budget_runs_out_in_reflect_defers_comparisons_and_the_next_night_judges_them(
    stacks: list[Stack],
) -> None:
    stack, ref = stacks
    ref.ingest_sample()
    with LLMStub(default=good_model) as stub:
        whole = _night(ref, stub.url, NIGHT)
        reference = _night(ref, stub.url, NEXT)
    assert whole.ok and reference.ok and not whole.deferred
    # A budgeted distill asks the settings' batch_groups (1) a call: its estimate's calls.
    distill_calls, reflect_calls = whole.run.steps[1].counts["estimate_calls"], whole.run.steps[2].llm_calls
    assert reflect_calls >= 2 and whole.run.steps[2].counts["compared"] >= 2
    expected = _state(ref)
    assert expected[1], "the sample must open a contradiction for this test to mean something"

    # Distill fits, reflect gets one call: the night stops between two calls, cleanly.
    stack = _budgeted(stack, NightBudget(calls=distill_calls + 1))
    stack.ingest_sample()
    with LLMStub(default=good_model) as stub:
        first = _night(stack, stub.url, NIGHT)
        asked = sum(1 for b in stub.requests if "Topics asked" not in str(b))
    steps = {s.step: s for s in first.run.steps}
    assert first.ok, [(s.step, s.status, s.error) for s in first.run.steps]
    assert [s.status for s in first.run.steps] == ["ok", "ok", "deferred", "ok"]
    r = steps["reflect"]
    assert r.llm_calls == 1 == asked  # the budget, not one call more
    left = r.counts["deferred_groups"]
    assert left >= 1 and r.counts["estimate_calls"] == reflect_calls
    assert r.counts["estimate_groups"] == r.counts["compared"] + left
    assert r.deferred == [f"{TEAM}: {left} comparison(s) deferred (budget: calls), taken first next night"]
    assert "comparison(s) deferred (budget: calls)" in render_night(first, stack.graph)
    _consistent(stack)

    stack = _budgeted(stack, NightBudget())
    with LLMStub(default=good_model) as stub:
        second = _night(stack, stub.url, NEXT)
    assert second.ok and not second.deferred
    assert second.run.steps[2].counts["compared"] == left  # exactly what was left, nothing asked twice
    _consistent(stack)
    assert _state(stack) == expected
