"""A model server on this machine needs no key: litellm's ``openai/`` provider gets a placeholder
(over real HTTP, through litellm and the OpenAI SDK, to tests/llm_stub.py on 127.0.0.1)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from structlog.testing import capture_logs

from taskzilla_sleep.core.errors import LLMError
from taskzilla_sleep.llm.base import Unanswered
from taskzilla_sleep.llm.client import LOOPBACK_PLACEHOLDER_KEY, LiteLLMProvider, is_loopback, placeholder_key
from tests.contract.test_llm_litellm import GOOD, STATEMENT, distill_request
from tests.llm_stub import LLMStub


def provider(url: str, **kw: Any) -> LiteLLMProvider:
    return LiteLLMProvider("openai/oracle", url, 10.0, 0, 1, 0.0, backoff_base_s=0.01, backoff_max_s=0.02, **kw)


def test_a_loopback_server_is_asked_with_no_key_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    caplog.set_level(logging.DEBUG)
    with LLMStub(default=lambda body: GOOD) as stub, capture_logs() as logs:
        [drafts] = provider(stub.url).distill_many([distill_request()])

    assert not isinstance(drafts, Unanswered) and [d.statement for d in drafts] == [STATEMENT]
    assert [c.authorization for c in stub.calls] == [f"Bearer {LOOPBACK_PLACEHOLDER_KEY}"]
    assert "llm_loopback_without_key" in {e["event"] for e in logs}
    out, err = capsys.readouterr()
    assert not any(LOOPBACK_PLACEHOLDER_KEY in t for t in (json.dumps(logs, default=str), caplog.text, out, err))


def test_localhost_counts_as_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LLMStub(default=lambda body: GOOD) as stub:
        [drafts] = provider(f"http://localhost:{stub.port}/v1").distill_many([distill_request()])

    assert not isinstance(drafts, Unanswered) and [d.statement for d in drafts] == [STATEMENT]
    assert [c.authorization for c in stub.calls] == [f"Bearer {LOOPBACK_PLACEHOLDER_KEY}"]


def test_a_configured_key_is_the_one_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-configured-key")
    with LLMStub(default=lambda body: GOOD) as stub:
        provider(stub.url).distill_many([distill_request()])

    assert [c.authorization for c in stub.calls] == ["Bearer sk-configured-key"]


def test_a_remote_server_never_gets_the_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from taskzilla_sleep.llm.client import _import_litellm

    litellm = _import_litellm()
    assert placeholder_key(litellm, "openai/oracle", "https://models.example.com/v1") is None
    assert placeholder_key(litellm, "openai/oracle", "http://127.0.0.1:9/v1") == LOOPBACK_PLACEHOLDER_KEY
    # A provider litellm knows needs no key (ollama) gets none either.
    assert placeholder_key(litellm, "ollama/llama3", "http://127.0.0.1:11434") is None
    # Without a key, a remote OpenAI-compatible server is not called at all: the SDK refuses first.
    with pytest.raises(LLMError, match=r"(?i)api.?key"):
        provider("http://192.0.2.1:9/v1").distill_many([distill_request()])


@pytest.mark.parametrize(
    ("base", "loopback"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.9.9.9/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://localhost:11434", True),
        ("http://LOCALHOST/v1", True),
        ("http://10.0.0.5:8000/v1", False),
        ("https://api.openai.com/v1", False),
        ("http://127.0.0.1.example.com/v1", False),
        ("http://localhost.example.com/v1", False),
        ("http://[::ffff:10.0.0.1]/v1", False),
        ("not a url", False),
        (None, False),
        ("", False),
    ],
)
def test_what_counts_as_loopback(base: str | None, loopback: bool) -> None:
    assert is_loopback(base) is loopback
