"""LiteLLMProvider against a real OpenAI-compatible HTTP server (tests/llm_stub.py) through litellm.

Everything goes over real HTTP on 127.0.0.1: litellm's ``openai/`` provider, the OpenAI SDK,
httpx. Only the model is scripted.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from taskzilla_sleep.errors import LLMError
from taskzilla_sleep.llm.base import (
    DistillRequest,
    EpisodeView,
    PatternView,
    ReflectRequest,
    Unanswered,
    Verdict,
    validate_draft,
)
from taskzilla_sleep.llm.client import LiteLLMProvider
from tests.llm_stub import LLMStub, Reply

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
IDS = ("ep_a1", "ep_a2", "ep_a3", "ep_a4", "ep_a5")
TEXTS = (
    "Martin: please keep PRs small, one change each",
    "Martin asked again for smaller PRs on taskzilla",
    "looks good",
    "Reminder from Martin: split big PRs before review",
    "+1",
)


def distill_request(group: str = "g1", ids: tuple[str, ...] = IDS) -> DistillRequest:
    return DistillRequest(
        team="core",
        group_key=group,
        episodes=tuple(
            EpisodeView(id=i, author="martin", channel="#dev", ts=T0 + timedelta(minutes=n), text=TEXTS[n % len(TEXTS)])
            for n, i in enumerate(ids)
        ),
        known_entities=("Martin", "taskzilla", "#dev"),
    )


def reflect_request() -> ReflectRequest:
    old = PatternView(id="p_old", statement="Martin prefers small PRs", kind="preference", first_seen=T0, support=5)
    new = PatternView(
        id="p_new", statement="Martin wants one big PR per feature", kind="preference", first_seen=T0, support=3
    )
    return ReflectRequest(team="core", new=new, old=old, similarity=0.82)


def answer(
    statement: str = "Martin prefers small PRs; keep changes scoped",
    kind: str = "preference",
    subjects: tuple[str, ...] = ("Martin",),
    confidence: float = 0.9,
    supporting_ids: tuple[str, ...] = ("ep_a1", "ep_a2", "ep_a4"),
) -> str:
    pattern = {
        "statement": statement,
        "kind": kind,
        "subjects": list(subjects),
        "confidence": confidence,
        "supporting_ids": list(supporting_ids),
    }
    return json.dumps({"pattern": pattern})


GOOD = answer()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMStub]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LLMStub() as server:
        yield server


def provider(stub: LLMStub, **overrides: Any) -> LiteLLMProvider:
    options: dict[str, Any] = {
        "model": "openai/stub",
        "api_base": stub.url,
        "timeout_s": 5.0,
        "max_retries": 2,
        "max_concurrency": 4,
        "temperature": 0.0,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    options.update(overrides)
    return LiteLLMProvider(**options)


def last_user_message(body: dict[str, Any]) -> str:
    content: str = body["messages"][-1]["content"]
    assert body["messages"][-1]["role"] == "user"
    return content


# -- distill: valid and invalid answers -----------------------------------------------------


def test_a_valid_distill_answer_is_accepted(stub: LLMStub) -> None:
    stub.script(GOOD)
    llm = provider(stub)
    req = distill_request()

    [draft] = llm.distill_many([req])

    assert draft is not None
    assert validate_draft(req, draft) is None
    assert draft.statement == "Martin prefers small PRs; keep changes scoped"
    assert draft.kind == "preference"
    assert draft.supporting_ids == ("ep_a1", "ep_a2", "ep_a4")
    assert draft.confidence == 0.9
    [body] = stub.requests
    assert body["model"] == "stub"
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "distill_v1"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert all(i in body["messages"][1]["content"] for i in IDS)
    usage = llm.usage.as_dict()
    assert (usage["calls"], usage["invalid_answers"], usage["retries"], usage["skipped"]) == (1, 0, 0, 0)
    assert usage["prompt_tokens"] == stub.calls[0].prompt_tokens > 0


def test_supporting_ids_outside_the_group_get_one_corrective_retry_and_a_fix_is_accepted(stub: LLMStub) -> None:
    wrong = answer(supporting_ids=("ep_a1", "ep_a2", "ep_zz"))
    stub.script(wrong, GOOD)
    llm = provider(stub)

    with capture_logs() as logs:
        [draft] = llm.distill_many([distill_request()])

    assert draft is not None and draft.supporting_ids == ("ep_a1", "ep_a2", "ep_a4")
    first, second = stub.requests
    # The retry is the same conversation plus the model's answer and what was wrong with it.
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": wrong}
    assert "supporting_ids not in the group sent" in last_user_message(second)
    assert "ep_zz" in last_user_message(second)
    assert (llm.usage.calls, llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (2, 1, 1, 0)
    [warning] = [e for e in logs if e["event"] == "llm_invalid_answer"]
    assert warning["log_level"] == "warning"
    assert (warning["kind"], warning["attempt"], warning["group"]) == ("distill", 1, "g1")
    assert "supporting_ids" in warning["reason"]
    # Never the prompt: no episode text in any log line.
    assert not any(TEXTS[0] in json.dumps(e, default=str) for e in logs)


def test_an_answer_still_wrong_after_the_retry_is_skipped_and_counted_never_a_draft(stub: LLMStub) -> None:
    wrong = answer(supporting_ids=("ep_zz", "ep_yy", "ep_xx"))
    stub.script(wrong, wrong, GOOD)  # the third must never be asked for
    llm = provider(stub)

    with capture_logs() as logs:
        [draft] = llm.distill_many([distill_request()])

    assert isinstance(draft, Unanswered) and "supporting_ids" in draft.reason  # not a decline: asked again later
    assert len(stub.requests) == 2
    assert stub.pending == 1
    assert (llm.usage.calls, llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (2, 2, 1, 1)
    assert [e["attempt"] for e in logs if e["event"] == "llm_invalid_answer"] == [1, 2]
    assert [e["kind"] for e in logs if e["event"] == "llm_answer_skipped"] == ["distill"]


def test_malformed_json_gets_a_corrective_retry(stub: LLMStub) -> None:
    stub.script("malformed", GOOD)
    llm = provider(stub)

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert "not valid JSON" in last_user_message(stub.requests[1])
    assert (llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (1, 1, 0)


def test_json_wrapped_in_a_code_fence_is_accepted_without_a_retry(stub: LLMStub) -> None:
    stub.script(f"Here you go:\n```json\n{GOOD}\n```")
    llm = provider(stub)

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert (len(stub.requests), llm.usage.invalid_answers) == (1, 0)


def test_an_answer_cut_off_at_max_tokens_is_told_to_be_shorter(stub: LLMStub) -> None:
    stub.script(Reply(content=GOOD[:40], finish_reason="length"), GOOD)
    llm = provider(stub)

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert "cut off" in last_user_message(stub.requests[1])
    assert stub.requests[0]["max_tokens"] >= 200


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (answer(confidence=1.7), "confidence"),
        (answer(statement="x" * 301), "at most 300 characters"),
        (answer(subjects=("Martin", "Kubernetes")), "subjects are not entities of the group"),
        (answer(kind="opinion"), "kind"),
        (answer(supporting_ids=("ep_a1", "ep_a2")), "at least 3 distinct supporting episodes"),
        ('{"relation": "same"}', "pattern: Field required"),
        ("", "empty"),
    ],
    ids=[
        "confidence-1.7",
        "statement-301",
        "unknown-subject",
        "unknown-kind",
        "too-few-ids",
        "no-pattern-key",
        "empty",
    ],
)
def test_invalid_drafts_are_rejected_with_the_reason(stub: LLMStub, bad: str, reason: str) -> None:
    stub.script(bad, bad)
    llm = provider(stub)

    [draft] = llm.distill_many([distill_request()])

    assert isinstance(draft, Unanswered)
    assert reason in last_user_message(stub.requests[1])
    assert (llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (2, 1, 1)


def test_a_statement_of_300_characters_is_accepted(stub: LLMStub) -> None:
    stub.script(answer(statement="y" * 300))
    llm = provider(stub)

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None and len(draft.statement) == 300


def test_pattern_null_is_no_pattern_not_an_invalid_answer(stub: LLMStub) -> None:
    stub.script('{"pattern": null}')
    llm = provider(stub)

    assert llm.distill_many([distill_request()]) == [None]
    assert (llm.usage.calls, llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (1, 0, 0, 0)


def test_a_group_smaller_than_min_support_is_not_sent(stub: LLMStub) -> None:
    llm = provider(stub)

    assert llm.distill_many([distill_request(ids=("ep_a1", "ep_a2"))]) == [None]
    assert (stub.requests, llm.usage.calls) == ([], 0)


def test_without_json_schema_no_response_format_is_sent(stub: LLMStub) -> None:
    stub.script(GOOD)
    llm = provider(stub, json_schema=False)

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert "response_format" not in stub.requests[0]


# -- transport failures ---------------------------------------------------------------------


def test_429_then_200_succeeds_after_backoff(stub: LLMStub) -> None:
    stub.script(429, GOOD)
    llm = provider(stub, backoff_base_s=0.2, backoff_max_s=1.0)

    started = time.monotonic()
    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert time.monotonic() - started >= 0.1  # the jittered delay is within [base/2, base]
    assert [c.status for c in stub.calls] == [429, 200]
    # A transport retry is not a corrective retry: the answer was never invalid.
    assert (llm.usage.calls, llm.usage.retries, llm.usage.invalid_answers) == (1, 0, 0)


def test_500_three_times_with_max_retries_2_raises_llm_error(stub: LLMStub) -> None:
    stub.script(500, 500, 500, GOOD)
    llm = provider(stub, max_retries=2)

    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\).*InternalServerError"):
        llm.distill_many([distill_request()])
    assert [c.status for c in stub.calls] == [500, 500, 500]
    assert llm.usage.calls == 0


def test_503_is_retried_too(stub: LLMStub) -> None:
    stub.script(503, GOOD)

    [draft] = provider(stub).distill_many([distill_request()])

    assert draft is not None
    assert [c.status for c in stub.calls] == [503, 200]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_other_4xx_raise_at_once(stub: LLMStub, status: int) -> None:
    stub.script(status, GOOD)

    with pytest.raises(LLMError, match="failed after 1 attempt"):
        provider(stub, max_retries=3).distill_many([distill_request()])
    assert len(stub.requests) == 1


def test_a_timeout_is_retried(stub: LLMStub) -> None:
    stub.script("timeout", GOOD)
    llm = provider(stub, timeout_s=0.5)

    started = time.monotonic()
    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert len(stub.requests) == 2
    assert 0.5 <= time.monotonic() - started < 5.0


def test_timeouts_beyond_max_retries_raise_llm_error(stub: LLMStub) -> None:
    stub.script("timeout", "timeout")

    with pytest.raises(LLMError, match="Timeout"):
        provider(stub, timeout_s=0.3, max_retries=1).distill_many([distill_request()])
    assert len(stub.requests) == 2


def test_a_closed_port_raises_llm_error_after_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LLMStub() as gone:
        url = gone.url  # a port that was just free and is closed again
    llm = LiteLLMProvider("openai/stub", url, 2.0, 1, 1, 0.0, backoff_base_s=0.01, backoff_max_s=0.02)

    with pytest.raises(LLMError, match=r"failed after 2 attempt"):
        llm.distill_many([distill_request()])


# -- many requests --------------------------------------------------------------------------


def _echo_first_ids(body: dict[str, Any]) -> str:
    """Support the pattern with the first three episode ids the request sent (its group)."""
    ids = re.findall(r"^(ep_\w+) \|", body["messages"][1]["content"], flags=re.MULTILINE)
    return answer(supporting_ids=tuple(ids[:3]))


def test_requests_run_concurrently_within_max_concurrency_and_results_keep_request_order(stub: LLMStub) -> None:
    stub.default = _echo_first_ids
    stub.latency_s = 0.25
    llm = provider(stub, max_concurrency=3)
    requests = [distill_request(f"g{n}", tuple(f"ep_{n}_{k}" for k in range(4))) for n in range(8)]

    started = time.monotonic()
    drafts = llm.distill_many(requests)
    elapsed = time.monotonic() - started

    assert 1 < stub.max_in_flight <= 3
    assert elapsed < 8 * 0.25  # not one after another
    assert [d.supporting_ids if d else None for d in drafts] == [
        (f"ep_{n}_0", f"ep_{n}_1", f"ep_{n}_2") for n in range(8)
    ]
    assert llm.usage.calls == 8


def test_one_failing_request_fails_the_run(stub: LLMStub) -> None:
    stub.default = _echo_first_ids
    stub.latency_s = 0.1
    stub.script(401)
    llm = provider(stub, max_concurrency=2)

    with pytest.raises(LLMError, match="AuthenticationError"):
        llm.distill_many([distill_request(f"g{n}") for n in range(6)])
    # Queued requests were cancelled: at most two per worker (the one it was on, and the next one it
    # picked up before the failure was seen) ever reached the server.
    assert len(stub.requests) <= 4


def test_usage_counts_calls_and_the_tokens_the_server_reported(stub: LLMStub) -> None:
    stub.script(GOOD, "malformed", GOOD, '{"relation": "same", "reason": "both ask for small PRs"}')
    llm = provider(stub, max_concurrency=1)

    llm.distill_many([distill_request("g1"), distill_request("g2")])
    llm.classify_many([reflect_request()])

    assert llm.usage.calls == 4 == len(stub.calls)
    assert llm.usage.prompt_tokens == sum(c.prompt_tokens for c in stub.calls) > 0
    assert llm.usage.completion_tokens == sum(c.completion_tokens for c in stub.calls) > 0
    assert llm.usage.as_dict()["retries"] == 1


def test_cost_of_an_unmapped_model_is_none_without_an_exception(stub: LLMStub) -> None:
    stub.script(GOOD)
    llm = provider(stub, model="openai/stub-unmapped-model")

    [draft] = llm.distill_many([distill_request()])

    assert draft is not None
    assert llm.usage.cost_usd is None
    assert llm.usage.calls == 1


def test_cost_of_a_mapped_model_comes_from_litellms_price_map(stub: LLMStub) -> None:
    stub.script(GOOD)
    llm = provider(stub, model="openai/gpt-4o-mini")

    llm.distill_many([distill_request()])

    assert llm.usage.cost_usd is not None and llm.usage.cost_usd > 0


# -- classify (reflect) -----------------------------------------------------------------------


def test_a_valid_verdict_is_accepted(stub: LLMStub) -> None:
    stub.script('{"relation": "contradicts", "reason": "one big PR vs small PRs"}')
    llm = provider(stub)

    [verdict] = llm.classify_many([reflect_request()])

    assert verdict == Verdict(relation="contradicts", reason="one big PR vs small PRs")
    [body] = stub.requests
    assert body["response_format"]["json_schema"]["name"] == "reflect_v1"
    user = last_user_message(body)
    assert "OLD (preference, 5 messages" in user and "Martin prefers small PRs" in user
    assert "NEW (preference, 3 messages" in user and "one big PR per feature" in user


def test_an_invalid_relation_is_retried_then_skipped(stub: LLMStub) -> None:
    stub.script('{"relation": "maybe", "reason": "?"}', "malformed")
    llm = provider(stub)

    [verdict] = llm.classify_many([reflect_request()])
    assert isinstance(verdict, Unanswered)
    assert "relation" in last_user_message(stub.requests[1])
    assert (llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (2, 1, 1)


def test_an_invalid_relation_fixed_on_retry_is_accepted(stub: LLMStub) -> None:
    stub.script('{"relation": "Same"}', '{"relation": "same", "reason": "identical"}')
    llm = provider(stub)

    assert llm.classify_many([reflect_request()]) == [Verdict(relation="same", reason="identical")]
    assert (llm.usage.invalid_answers, llm.usage.retries, llm.usage.skipped) == (1, 1, 0)


def test_empty_batches_cost_nothing(stub: LLMStub) -> None:
    llm = provider(stub)

    assert llm.distill_many([]) == []
    assert llm.classify_many([]) == []
    assert stub.requests == []
