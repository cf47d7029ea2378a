"""A whole night through litellm over real HTTP: the stub plays the model, good and bad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ops.bench import model as sober
from ops.bench import prompt_data
from taskzilla_sleep.core.models import EpisodeStatus, PatternStatus
from taskzilla_sleep.llm.check import CHECK_PROMPT
from taskzilla_sleep.stores.ports import Embedder
from tests.contract.test_cycle import NIGHT, TEAM, Stack
from tests.llm_stub import LLMStub

CHANGE_CUES = ("from now on", "switched to", "instead of", "anymore", "no more")


_EMBEDDER: list[Embedder] = []


def _embed(texts: Any) -> list[list[float]]:
    if not _EMBEDDER:
        from taskzilla_sleep.stores.embeddings import OfflineMiniLM

        _EMBEDDER.append(OfflineMiniLM())
    return _EMBEDDER[0].embed(list(texts))


def good_model(body: dict[str, Any]) -> str:
    """Distill (v3): the bench's sober model (``ops/bench/model.py``: the messages that state a rule,
    told apart by meaning, one belief each), statements marked "Team habit: "; reflect: 'supersedes'
    when NEW carries a change cue, else 'unrelated'; the model check (``llm.check``): ok."""
    if CHECK_PROMPT in json.dumps(body):
        return "ok"
    if prompt_data.is_distill(body):
        answer = json.loads(sober.responder(_embed)(body))
        for g in answer["groups"]:
            for b in g["beliefs"]:
                b["statement"] = f"Team habit: {b['statement'][:200]}"
        return json.dumps(answer)
    new, olds = prompt_data.beliefs(body)
    changed = any(c in str(new.get("statement", "")).casefold() for c in CHANGE_CUES)
    return prompt_data.reflect_answer(["supersedes" if changed else "unrelated"] * len(olds))


def liar_model(body: dict[str, Any]) -> str:
    """Distill answers cite messages that were never sent."""
    if prompt_data.is_distill(body):
        return prompt_data.distill_answer(
            {
                g.number: [{"statement": "Made up", "kind": "fact", "support": [97, 98, 99]}]
                for g in prompt_data.groups(body)
            }
        )
    return prompt_data.reflect_answer(["unrelated"] * len(prompt_data.beliefs(body)[1]))


@pytest.fixture
def stack(tmp_path: Path, offline_embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Any:
    from taskzilla_sleep.core.settings import load_settings
    from taskzilla_sleep.llm.offline import OfflineProvider
    from taskzilla_sleep.stores.chroma import ChromaVectorStore
    from taskzilla_sleep.stores.falkordb import open_falkordb

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    graph = open_falkordb(tmp_path / "f")
    graph.ensure_schema()
    vectors = ChromaVectorStore.embedded(tmp_path / "c", offline_embedder)
    s = Stack(
        load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}),
        graph,
        vectors,
        offline_embedder,
        OfflineProvider(offline_embedder),
    )
    yield s
    vectors.close()
    graph.close()


def _provider(url: str) -> Any:
    from taskzilla_sleep.llm.client import LiteLLMProvider

    return LiteLLMProvider(
        model="openai/stub",
        api_base=url,
        timeout_s=10,
        max_retries=2,
        max_concurrency=3,
        temperature=0,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )


def test_a_night_through_litellm_over_http(stack: Stack) -> None:
    handed = stack.ingest_sample()
    with LLMStub(default=good_model) as stub:
        stub.script(429, 500)  # the first two calls fail transiently and are retried
        stack.llm = _provider(stub.url)  # type: ignore[assignment]
        result = stack.night(NIGHT)
    assert result.ok, [s.error for s in result.run.steps]
    distill = result.run.steps[1]
    # The sample week is one topic (under distill.topic_max_messages): one call, every belief in it.
    assert distill.llm_calls == 1 and distill.counts["groups"] == 1
    assert distill.prompt_tokens > 0 and distill.completion_tokens > 0
    assert distill.counts["patterns_added"] >= 3
    assert distill.prompt_ids == ["distill-v3"] and result.run.steps[2].prompt_ids == ["reflect-v2"]
    pats = [p for p in stack.graph.patterns(TEAM)]
    assert all(p.statement.startswith("Team habit: ") and p.prompt_id == "distill-v3" for p in pats)
    cons = stack.graph.contradictions(TEAM, "open")
    assert cons, "the voice-standup change should be flagged"
    assert all(c.prompt_id == "reflect-v2" for c in cons)
    # The standup switch is a change by some of the same people, after the old rule: an update.
    assert any(c.kind == "update" for c in cons), [(c.kind, c.reason) for c in cons]
    # ai-drafts are never sent to the model.
    sent = [b for b in stub.requests if prompt_data.is_distill(b)]
    assert sent and not any("Draft: " in prompt_data.user_text(b) for b in sent)
    # The product's budget: at most 0.1 LLM calls per episode handed to ingest (grouping first, then
    # one call a group); and no more than 0.2 per episode stored (the chatter skipped is not stored).
    stored = sum(stack.graph.counts().episodes.values())
    calls = sum(s.llm_calls for s in result.run.steps)
    assert stored == handed.new
    assert calls <= 0.1 * (handed.new + handed.skipped) and calls <= 0.2 * stored


def test_a_lying_model_never_writes_a_pattern_and_its_questions_are_asked_again(stack: Stack) -> None:
    stack.ingest_sample()
    with LLMStub(default=liar_model) as stub:
        provider = _provider(stub.url)
        stack.llm = provider  # type: ignore[assignment]
        result = stack.night(NIGHT)
    assert stack.graph.patterns(TEAM) == []
    assert stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value]) == []
    # One corrective retry, then the topic is skipped.
    assert provider.usage.invalid_answers >= 2 and provider.usage.skipped >= 1
    # Answers that fail validation are not treated better than a 5xx: no usable answer at all is a
    # failed step, recorded with its counts, and the questions are still open.
    distill = result.run.steps[1]
    assert not result.ok and distill.status == "failed" and "usable answer" in (distill.error or "")
    assert distill.counts["skipped_groups"] >= 1 and distill.counts["retry_groups"] == distill.counts["skipped_groups"]
    with LLMStub(default=good_model) as stub:
        stack.llm = _provider(stub.url)  # type: ignore[assignment]
        rerun = stack.night(NIGHT)
    assert rerun.ok, [s.error for s in rerun.run.steps]
    assert rerun.run.steps[1].counts["patterns_added"] >= 3


def test_an_unreachable_model_fails_the_step_and_records_it(stack: Stack) -> None:
    stack.ingest_sample()
    with LLMStub(default=lambda body: 503) as stub:
        stack.llm = _provider(stub.url)  # type: ignore[assignment]
        result = stack.night(NIGHT)
    steps = {s.step: s for s in result.run.steps}
    assert not result.ok
    assert steps["prune"].status == "ok" and steps["distill"].status == "failed"
    assert steps["reflect"].status == "skipped" and steps["decay"].status == "skipped"
    assert "LLMError" in (steps["distill"].error or "")
    (recorded,) = [r for r in stack.graph.runs(5) if r.id == result.run.id]
    assert [s.status for s in recorded.steps] == ["ok", "failed", "skipped", "skipped"]
    assert all(p.status is not PatternStatus.ACTIVE for p in stack.graph.patterns(TEAM))
