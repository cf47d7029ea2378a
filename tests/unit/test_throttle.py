"""A client that keeps presenting wrong tokens waits, longer each time: the rule itself on a fake clock,
then the API, the MCP endpoint and the console login answering 429 with Retry-After (the app the
worker serves, on the in-memory stores), each counted for /metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.settings import ApiSettings, Settings, TokenGrant
from taskzilla_sleep.core.throttle import Throttle, Throttled
from taskzilla_sleep.interfaces.api import create_app
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import Tokens, token_hash
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
READER, ADMIN = "tz-reader-token", "tz-admin-token"
GRANTS = {
    token_hash(READER): {"name": "viewer", "teams": ["platform"], "role": "read"},
    token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"},
}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def tokens(clock: Clock, instruments: Instruments | None = None) -> Tokens:
    grants = {k: TokenGrant.model_validate(v) for k, v in GRANTS.items()}
    return Tokens(grants, Throttle(instruments, clock=clock))


def wait_of(t: Tokens, client: str = "10.0.0.1") -> int | None:
    try:
        t.authenticate(READER, client)
    except Throttled as exc:
        return exc.retry_after_s
    return None


def fail(t: Tokens, client: str = "10.0.0.1") -> None:
    with pytest.raises(Exception, match="matches no configured token"):
        t.authenticate("wrong", client)


def test_five_wrong_tokens_are_free_then_each_one_doubles_the_wait() -> None:
    clock = Clock()
    t = tokens(clock)
    for _ in range(5):
        fail(t)
        assert wait_of(t) is None  # a mistyped token or five: no wait, the right one works
    fail(t)
    assert wait_of(t) == 1
    clock.t += 1.01
    waits = []
    for _ in range(11):
        fail(t)
        waits.append(wait_of(t))
        clock.t += waits[-1] or 0
    assert waits == [2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]  # capped at 15 minutes


def test_while_it_waits_even_the_right_token_is_refused_and_a_success_does_not_reset_the_count() -> None:
    clock = Clock()
    t = tokens(clock)
    for _ in range(6):
        fail(t)
    with pytest.raises(Throttled, match="retry in 1 s"):
        t.authenticate(ADMIN, "10.0.0.1")
    with pytest.raises(Throttled):
        t.authenticate("wrong", "10.0.0.1")  # refused unseen: not counted either
    clock.t += 1
    assert t.authenticate(READER, "10.0.0.1").name == "viewer"  # the wait is over: a valid token works
    fail(t)
    assert wait_of(t) == 2  # the count went on: one valid token does not buy more free guesses


def test_clients_wait_apart_and_are_forgotten_after_an_hour_without_failure() -> None:
    clock = Clock()
    t = tokens(clock)
    for _ in range(6):
        fail(t, "10.0.0.1")
    assert wait_of(t, "10.0.0.1") == 1 and wait_of(t, "10.0.0.2") is None
    clock.t += 3601
    for _ in range(5):
        fail(t, "10.0.0.1")
    assert wait_of(t, "10.0.0.1") is None  # forgotten: five free failures again


def test_the_table_of_clients_is_bounded() -> None:
    clock = Clock()
    throttle = Throttle(clock=clock, free=0, max_clients=3)
    for i in range(10):
        throttle.failed(f"10.0.0.{i}", "api")
    with pytest.raises(Throttled):
        throttle.check("10.0.0.9", "api")
    throttle.check("10.0.0.0", "api")  # the oldest made room


def test_a_missing_token_is_refused_but_not_counted_as_a_guess() -> None:
    clock = Clock()
    t = tokens(clock)
    for _ in range(20):
        with pytest.raises(Exception, match="bearer token is required"):
            t.authenticate(None, "10.0.0.1")
    assert wait_of(t) is None


# -- the HTTP surfaces ----------------------------------------------------------------------------


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[TestClient, Worker]]:
    settings = Settings(data_dir=tmp_path, api=ApiSettings.model_validate({"tokens": GRANTS}))
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=False, env={})
    try:
        client = TestClient(create_app(worker.api_deps()), base_url="http://127.0.0.1", follow_redirects=False)
        yield client, worker
    finally:
        worker._shutdown()


def metric(c: TestClient, name: str, surface: str) -> float:
    text = c.get("/metrics").text
    found = re.search(rf'^taskzilla_sleep_{name}_total{{surface="{surface}"}} (\S+)$', text, re.MULTILINE)
    assert found, text[-3000:]
    return float(found.group(1))


def test_the_api_answers_429_with_retry_after_once_a_client_failed_too_often(app: tuple[TestClient, Worker]) -> None:
    c, _ = app
    wrong = {"Authorization": "Bearer not-a-token"}
    for _ in range(6):
        r = c.get("/v1/facts", headers=wrong)
        assert r.status_code == 401, r.text
    r = c.get("/v1/facts", headers={"Authorization": f"Bearer {READER}"})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "busy" and "failed authentications" in r.json()["error"]["message"]
    assert metric(c, "auth_failures", "api") == 6 and metric(c, "auth_throttled", "api") == 1
    schema = c.get("/openapi.json").json()
    assert "429" in schema["paths"]["/v1/facts"]["get"]["responses"]


def test_the_mcp_endpoint_shares_the_backoff_and_answers_429(app: tuple[TestClient, Worker]) -> None:
    c, _ = app
    for _ in range(6):
        r = c.post("/mcp", headers={"Authorization": "Basic d3Jvbmc6d3Jvbmc="}, json={})
        assert r.status_code == 401, r.text
    r = c.post("/mcp", headers={"Authorization": f"Bearer {ADMIN}"}, json={})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert c.get("/v1/facts", headers={"Authorization": f"Bearer {READER}"}).status_code == 429  # one backoff
    assert metric(c, "auth_failures", "mcp") == 6 and metric(c, "auth_throttled", "mcp") == 1


def test_failed_console_logins_make_the_browser_wait(app: tuple[TestClient, Worker]) -> None:
    c, _ = app
    form = c.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert nonce
    for _ in range(6):
        r = c.post("/ui/login", data={"token": "guess", "csrf": nonce.group(1), "next": "/ui/contradictions"})
        assert r.status_code == 401
    r = c.post("/ui/login", data={"token": ADMIN, "csrf": nonce.group(1), "next": "/ui/contradictions"})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1" and "retry in 1 s" in r.text
    assert "tz_console=" not in r.headers.get("set-cookie", "")  # no session for a right token while it waits
    assert metric(c, "auth_failures", "console") == 6 and metric(c, "auth_throttled", "console") == 1
