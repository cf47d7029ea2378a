"""Two replicas of the worker's HTTP server (uvicorn on 127.0.0.1, each with its own connection to one
graph store: embedded FalkorDB, or a real Neo4j server): a console session started on one is good on
the other, a notice written by one is shown by the other, a logout on one ends it on both, and a
signed Slack request taken by one is refused as a replay by the other. A client's backoff after
wrong tokens is its own: another address is not held back."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from taskzilla_sleep.app import Services, build, build_graph
from taskzilla_sleep.core.models import Contradiction, ContradictionKind, ContradictionStatus
from taskzilla_sleep.core.settings import Secrets, load_settings
from taskzilla_sleep.interfaces.console.sessions import COOKIE, LOGIN_COOKIE
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash
from tests.http_receiver import Receiver
from tests.unit.steps.conftest import episode, pattern

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
ADMIN = "tz-replica-admin-token"
SIGNING = "replica-signing-secret-0123456789"


@dataclass
class Replicas:
    a: str
    b: str
    services: Services
    rx: Receiver

    def contradiction(self, name: str) -> Contradiction:
        g = self.services.graph
        eps = [episode(f"{name}-{i}", f"{name} deploy rule {i}") for i in range(4)]
        g.upsert_episodes(eps, [])
        old = pattern(f"{name}-old", "Deploys need one review.", eps[:2])
        new = pattern(f"{name}-new", "Deploys need two reviews.", eps[2:])
        for p in (old, new):
            g.write_pattern(p, [], [])
        c = Contradiction(
            id=f"con_{name}",
            team="platform",
            old_pattern_id=old.id,
            new_pattern_id=new.id,
            kind=ContradictionKind.DISAGREEMENT,
            opened_at=NOW,
        )
        g.open_contradiction(c, counter=1, old_confidence=0.5)
        return c


@pytest.fixture(params=["falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replicas]:
    rx = Receiver().start()
    over: dict[str, object] = {
        "api.default_team": "platform",
        "api.tokens": {token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"}},
        "alerts.channels": {
            "platform-slack": {
                "kind": "slack",
                "url_env": "SLACK_URL",
                "signing_secret_env": "SLACK_SIGNING",
                "channel_id": "CPLAT",
                "teams": ["platform"],
            }
        },
    }
    secrets = Secrets()
    if request.param == "neo4j":
        from tests.neo4j_service import neo4j_auth

        over |= {"graph.backend": "neo4j", "graph.neo4j_uri": request.getfixturevalue("neo4j_uri")}
        auth = neo4j_auth()
        if auth:
            over["graph.neo4j_user"] = auth[0]
            secrets = Secrets.from_env({"TASKZILLA_NEO4J_PASSWORD": auth[1]})
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides=over)
    env = {"SLACK_URL": rx.url("/slack/hook"), "SLACK_SIGNING": SIGNING}
    workers: list[Worker] = []
    try:
        with build(settings, secrets) as services:
            services.graph.delete_all()
            second = build_graph(settings, secrets)  # replica B's own connection to the same graph
            try:
                b_services = Services(settings, second, services.vectors, services.embedder)
                for s in (services, b_services):
                    workers.append(Worker(s, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env=env))
                a, b = (w.start_api() for w in workers)
                assert a is not None and b is not None and a != b
                yield Replicas(a, b, services, rx)
            finally:
                for w in workers:
                    w._shutdown()
                services.graph.delete_all()
                second.close()
    finally:
        rx.stop()


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def login(base: str) -> str:
    """Log in through replica ``base``'s form; the session cookie's value."""
    with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as c:
        form = c.get("/ui/login")
        assert form.cookies[LOGIN_COOKIE] == csrf_of(form.text)  # the client keeps the login form's cookie
        done = c.post("/ui/login", data={"token": ADMIN, "csrf": csrf_of(form.text), "next": "/ui/contradictions"})
        assert done.status_code == 303, done.text
        return str(done.cookies[COOKIE])


def test_a_console_session_started_on_one_replica_is_good_on_the_other(replicas: Replicas) -> None:
    c = replicas.contradiction("shared")
    sid = login(replicas.a)
    cookies = {COOKIE: sid}
    with (
        httpx.Client(base_url=replicas.a, cookies=cookies, follow_redirects=False, timeout=30) as a,
        httpx.Client(base_url=replicas.b, cookies=cookies, follow_redirects=False, timeout=30) as b,
    ):
        page = b.get("/ui/contradictions")
        assert page.status_code == 200 and "ops-admin" in page.text and c.id in page.text  # no login on B
        done = b.post(f"/ui/contradictions/{c.id}/resolve", data={"keep": "both", "csrf": csrf_of(page.text)})
        assert done.status_code == 303, done.text
        shown = a.get("/ui/contradictions")  # the redirect lands on the other replica
        assert f"resolved {c.id}: kept both (by ops-admin)" in shown.text
        assert "resolved" not in a.get("/ui/facts").text  # a notice is shown once
        out = a.post("/ui/logout", data={"csrf": csrf_of(shown.text)})
        assert out.status_code == 303
        assert b.get("/ui/contradictions").status_code == 303  # logged out on B too
    assert replicas.services.graph.get_contradiction(c.id).resolved_by == "ops-admin"
    assert sid not in json.dumps(_session_nodes(replicas.services))  # the store holds a hash, not the cookie


def _session_nodes(services: Services) -> list[object]:
    snapshot = services.graph.snapshot()  # type: ignore[attr-defined]
    return [n for n in snapshot["nodes"] if "ConsoleSession" in n["labels"]]


def test_a_slack_request_taken_by_one_replica_is_a_replay_on_the_other(replicas: Replicas) -> None:
    c = replicas.contradiction("replay")
    payload = {
        "type": "block_actions",
        "user": {"id": "U042", "username": "alice"},
        "channel": {"id": "CPLAT"},
        "actions": [{"type": "button", "action_id": "tz_keep_new", "block_id": "tz_resolve", "value": c.id}],
        "response_url": replicas.rx.url("/slack/response"),
        "message": {"blocks": []},
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()))
    sig = "v0=" + hmac.new(SIGNING.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": sig,
    }
    first = httpx.post(replicas.a + "/chat/slack/interactions", content=body, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert replicas.services.graph.get_contradiction(c.id).status is ContradictionStatus.RESOLVED
    again = httpx.post(replicas.b + "/chat/slack/interactions", content=body, headers=headers, timeout=30)
    assert again.status_code == 401 and "replayed" in again.json()["error"]["message"]


def _get(base: str, path: str, token: str, source: str) -> http.client.HTTPResponse:
    """GET from the local address ``source`` (the loopback network is 127.0.0.0/8: each is a client)."""
    host, port = urllib.parse.urlsplit(base).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_a_clients_backoff_holds_back_that_address_only(replicas: Replicas) -> None:
    for _ in range(6):
        assert _get(replicas.a, "/v1/facts", "wrong-guess", "127.0.0.3").status == 401
    held = _get(replicas.a, "/v1/facts", ADMIN, "127.0.0.3")
    assert held.status == 429 and held.getheader("Retry-After") == "1"
    assert _get(replicas.a, "/v1/facts", ADMIN, "127.0.0.4").status == 200  # another client
    metrics = httpx.get(replicas.a + "/metrics", timeout=30).text
    assert 'taskzilla_sleep_auth_failures_total{surface="api"} 6.0' in metrics
    assert 'taskzilla_sleep_auth_throttled_total{surface="api"} 1.0' in metrics
