"""The model check (``taskzilla-sleep check``, the worker at start, ``/readyz``, ``/v1/status``,
``status`` and ``taskzilla_sleep_llm_up``) through the real litellm against the local OpenAI-compatible
server (tests/llm_stub.py): model ok, a provider litellm does not know, a missing key, a refused key,
a model the server does not serve, a server that does not answer, and the offline provider."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from taskzilla_sleep.app import build
from taskzilla_sleep.core.settings import LLMSettings, load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.llm.check import FAILED_TTL_S, OK_TTL_S, CachedModelCheck, ModelCheck, check_model
from taskzilla_sleep.night.schedule import ScaledClock
from tests.e2e.test_cli import cli
from tests.llm_stub import LLMStub

CLOCK = datetime.fromisoformat("2026-11-28T12:00:00+01:00")  # midday: no night is due


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def stub(no_key: None) -> Iterator[LLMStub]:
    with LLMStub(default=lambda body: "ok") as s:
        yield s


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_model_that_answers_is_ok_after_one_tiny_call(stub: LLMStub) -> None:
    verdict = check_model(LLMSettings(model="openai/stub", api_base=stub.url))
    assert verdict.ok and verdict.fix is None
    assert verdict.detail.startswith("model ok (openai/stub at http://127.0.0.1:")
    (body,) = stub.requests  # one call, small and short
    assert body["max_tokens"] <= 8 and len(json.dumps(body["messages"])) < 200


def test_a_provider_litellm_does_not_know_names_llm_model(stub: LLMStub) -> None:
    for model in ("nosuchprovider/some-model", "gpt-does-not-exist-anywhere"):
        verdict = check_model(LLMSettings(model=model))
        assert not verdict.ok and verdict.fix == "llm.model", verdict
        assert "knows no provider" in verdict.detail and model in verdict.detail
    assert stub.requests == []


def test_a_missing_key_names_the_environment_variable(no_key: None) -> None:
    with capture_logs() as logs:
        verdict = check_model(LLMSettings(model="openai/gpt-4o-mini"))
    assert not verdict.ok and verdict.fix == "OPENAI_API_KEY"
    assert verdict.line() == (
        "no API key for openai/gpt-4o-mini: OPENAI_API_KEY is not set in the environment (fix: OPENAI_API_KEY)"
    )
    assert [(e["event"], e["log_level"], e["fix"]) for e in logs] == [("llm_check_failed", "error", "OPENAI_API_KEY")]


def test_a_refused_key_an_unknown_model_and_a_silent_server_say_what_to_fix(stub: LLMStub) -> None:
    settings = LLMSettings(model="openai/stub", api_base=stub.url)
    stub.script(401)
    refused = check_model(settings)
    stub.script(404)
    unknown = check_model(settings)
    assert (refused.ok, refused.fix) == (False, "OPENAI_API_KEY") and "refused the key" in refused.detail
    assert (unknown.ok, unknown.fix) == (False, "llm.model") and "does not serve openai/stub" in unknown.detail
    down = check_model(LLMSettings(model="openai/stub", api_base=f"http://127.0.0.1:{closed_port()}/v1"))
    assert (down.ok, down.fix) == (False, "llm.api_base") and "does not answer" in down.detail


def test_no_model_is_the_offline_provider_and_ok() -> None:
    verdict = check_model(LLMSettings())
    assert verdict.ok and verdict.model is None and "offline provider" in verdict.detail


def test_the_cache_reuses_a_good_verdict_ten_minutes_and_a_failure_one() -> None:
    now = [0.0]
    answers = [False, True]
    calls: list[float] = []

    def check(settings: LLMSettings) -> ModelCheck:
        calls.append(now[0])
        return ModelCheck(answers[min(len(calls) - 1, 1)], settings.model, "x")

    cached = CachedModelCheck(LLMSettings(model="openai/x"), check, clock=lambda: now[0])
    assert cached.last() is None and cached.up() is None  # nothing asked yet: no verdict made up
    assert cached.current() is not None and cached.up() is False
    now[0] = FAILED_TTL_S - 1
    cached.current()
    now[0] = FAILED_TTL_S + 1
    assert cached.up() is False and cached.current() is not None and cached.up() is True
    now[0] += OK_TTL_S - 1
    cached.current()
    assert calls == [0.0, FAILED_TTL_S + 1]


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_worker_starts_with_a_broken_model_says_so_and_serves_the_verdict(tmp_path: Path, stub: LLMStub) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"llm": {"model": "openai/stub", "api_base": stub.url}}))
    settings = load_settings(config, env={"TASKZILLA_DATA_DIR": str(tmp_path / "data")})
    stub.script(404)  # the server does not serve the model
    with build(settings) as services:
        worker = Worker(services, ScaledClock(CLOCK, 1.0), serve_api=True, api_port=0)
        url = worker.start_api()
        assert url is not None
        loop = threading.Thread(target=worker.run, name="worker-loop")
        with capture_logs() as logs:
            loop.start()
            deadline = time.monotonic() + 60
            while worker.llm_check.last() is None:
                assert time.monotonic() < deadline, "no model check at start"
                time.sleep(0.05)
            try:
                status, ready = _get(url + "/readyz")
                metrics = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
                asked = len(stub.requests)
                for _ in range(5):  # probes read the verdict: they never call the model
                    assert _get(url + "/readyz")[0] == 200
                assert len(stub.requests) == asked
                assert worker.status()["model"]["ok"] is False
            finally:
                worker.request_stop()
                loop.join(timeout=60)
    assert not loop.is_alive()
    assert status == 200 and ready["ready"] is True  # the stores are ready; the model is detail
    model = ready["model"]
    assert isinstance(model, dict) and model["ok"] is False and model["fix"] == "llm.model"
    assert "does not serve openai/stub" in str(model["detail"])
    assert "taskzilla_sleep_llm_up 0.0" in metrics
    failed = [e for e in logs if e["event"] == "llm_check_failed"]
    assert failed and failed[0]["log_level"] == "error"
    assert any(e["event"] == "worker_started" for e in logs) and any(e["event"] == "worker_stopped" for e in logs)


def test_the_check_command_and_status(tmp_path: Path, stub: LLMStub) -> None:
    model = {"TASKZILLA__LLM__MODEL": "openai/stub", "TASKZILLA__LLM__API_BASE": stub.url}
    ok = cli("check", env=model)
    assert (ok.returncode, ok.stdout.strip()) == (0, f"model ok (openai/stub at {stub.url} answered)")
    missing = cli("check", "--json", env={"TASKZILLA__LLM__MODEL": "openai/gpt-4o-mini"})
    assert missing.returncode == 1 and json.loads(missing.stdout)["fix"] == "OPENAI_API_KEY"
    empty = cli("check", env={"TASKZILLA__LLM__MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": " "})
    assert (empty.returncode, empty.stdout.strip()) == (
        1,
        "no API key for openai/gpt-4o-mini: OPENAI_API_KEY is set but empty (fix: OPENAI_API_KEY)",
    )
    unknown = cli("check", env={"TASKZILLA__LLM__MODEL": "nosuchprovider/x"})
    assert unknown.returncode == 1 and unknown.stdout.strip().endswith("(fix: llm.model)")
    offline = cli("check")
    assert offline.returncode == 0 and "offline provider" in offline.stdout
    status = cli("status", data_dir=tmp_path / "d", env={"TASKZILLA__LLM__MODEL": "nosuchprovider/x"})
    assert status.returncode == 0, status.stderr  # the stores are fine: the model is its own line
    assert "model:    FAILED: litellm knows no provider" in status.stdout
