"""The HTTP API on the embedded stores (FastAPI's TestClient; the worker e2e tests cover real sockets)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from taskzilla_sleep.api import ApiDeps, create_app
from taskzilla_sleep.app import Services, build
from taskzilla_sleep.demo import sample_lines
from taskzilla_sleep.pipeline import NightRequest, run_night
from taskzilla_sleep.settings import load_settings

NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
TOKEN = "tz-api-token-for-tests"


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides={"api.max_body_bytes": 4096})) as s:
        yield s


def client(s: Services, token: str | None = None, max_body_bytes: int | None = None) -> TestClient:
    woke: list[int] = []
    settings = s.settings
    if max_body_bytes is not None:
        api = settings.api.model_copy(update={"max_body_bytes": max_body_bytes})
        settings = settings.model_copy(update={"api": api})
    deps = ApiDeps(
        settings=settings,
        graph=s.graph,
        vectors=s.vectors,
        ingestor=s.ingestor(clock=lambda: NOW),
        clock=lambda: NOW,
        token=token,
        status=lambda: {"ok": True},
        metrics=lambda: (b"m 1\n", "text/plain"),
        on_ingest=lambda: woke.append(1),
    )
    c = TestClient(create_app(deps))
    c.woke = woke  # type: ignore[attr-defined]
    return c


def ep(i: int, **over: Any) -> dict[str, Any]:
    return {
        "team": "platform",
        "channel": "dev",
        "author": f"p{i}",
        "text": f"we always pair on release days {i}",
        "ts": "2026-11-27T10:00:00+01:00",
        "provenance": "human",
        **over,
    }


def test_openapi_lists_every_endpoint(services: Services) -> None:
    paths = client(services).get("/openapi.json").json()["paths"]
    for p in (
        "/episodes",
        "/recall",
        "/contradictions",
        "/contradictions/{cid}/resolve",
        "/status",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert p in paths


def test_ingest_validates_everything_first_and_writes_nothing_on_error(services: Services) -> None:
    c = client(services)
    r = c.post("/episodes", json={"episodes": [ep(1), ep(2, provenance="robot"), ep(3, ts="2026-11-27T10:00")]})
    assert r.status_code == 422
    assert [(e["index"], e["field"]) for e in r.json()["detail"]] == [(1, "provenance"), (2, "ts")]
    assert services.graph.counts().episodes == {}
    ok = c.post("/episodes", json=[ep(1), ep(2)])
    assert ok.status_code == 200 and ok.json()["new"] == 2 and c.woke == [1]  # type: ignore[attr-defined]
    again = c.post("/episodes", json=[ep(1), ep(2)])
    assert again.json() == {"new": 0, "present": 2, "skipped": 0, "skipped_by_connector": {}}


def test_write_endpoints_need_the_bearer_token_when_set(services: Services) -> None:
    c = client(services, token=TOKEN)
    assert c.post("/episodes", json=[ep(1)]).status_code == 401
    assert c.post("/episodes", json=[ep(1)], headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/episodes", json=[ep(1)], headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert c.post("/contradictions/x/resolve", json={"keep": "new", "by": "a"}).status_code == 401
    assert c.get("/recall", params={"q": "pair"}).status_code == 200  # reads stay open
    assert c.get("/healthz").json() == {"ok": True}


def test_bodies_over_the_limit_are_refused(services: Services) -> None:
    c = client(services)
    big = json.dumps([ep(i, text="x" * 500) for i in range(20)])
    r = c.post("/episodes", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    chunks = (big[i : i + 1000].encode() for i in range(0, len(big), 1000))  # no Content-Length
    r = c.post("/episodes", content=chunks, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert services.graph.counts().episodes == {}


def test_recall_contradictions_and_resolve(services: Services) -> None:
    services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
    res = run_night(services, NightRequest(now=NOW))
    assert res.ok
    c = client(services)
    items = c.get("/recall", params={"q": "deploy on friday", "k": 2}).json()
    assert items[0]["kind"] == "pattern" and "friday" in items[0]["text"].casefold()
    (con,) = c.get("/contradictions").json()
    cid = con["contradiction"]["id"]
    assert con["contradiction"]["kind"] == "update"  # the standup switch: a change to confirm
    assert con["contradiction"]["prompt_id"] == "offline-reflect-v1"
    assert "async" in con["old"].casefold()
    assert c.post(f"/contradictions/{cid}/resolve", json={"keep": "maybe", "by": "x"}).status_code == 422
    done = c.post(f"/contradictions/{cid}/resolve", json={"keep": "both", "by": "sara", "note": "both hold"})
    assert done.status_code == 200 and done.json()["resolution"] == "both"
    assert c.post(f"/contradictions/{cid}/resolve", json={"keep": "new", "by": "sara"}).status_code == 409
    assert c.post("/contradictions/nope/resolve", json={"keep": "new", "by": "sara"}).status_code == 404
    assert c.get("/contradictions", params={"status": "resolved"}).json()[0]["contradiction"]["note"] == "both hold"
    assert c.get("/readyz").json()["ready"] is True
    assert c.get("/metrics").text == "m 1\n"


def test_the_bearer_scheme_is_case_insensitive_the_token_is_not(services: Services) -> None:
    c = client(services, token=TOKEN)
    for scheme in ("bearer", "BEARER", "Bearer", "bEaReR"):
        r = c.post("/episodes", json=[ep(1)], headers={"Authorization": f"{scheme} {TOKEN}"})
        assert r.status_code == 200, (scheme, r.text)
    for header in (f"Basic {TOKEN}", f"Bearer {TOKEN.upper()}", f"Bearer{TOKEN}", TOKEN, f"Bearer {TOKEN}x"):
        assert c.post("/episodes", json=[ep(2)], headers={"Authorization": header}).status_code == 401, header
    assert services.graph.counts().episodes == {"raw": 1}


def test_recall_with_a_team_that_cannot_exist_is_422(services: Services) -> None:
    c = client(services)
    for team in ("a b", "../x", "é", "x" * 49, ""):
        r = c.get("/recall", params={"q": "pair", "team": team})
        assert r.status_code == 422, (team, r.status_code, r.text)
    assert c.get("/recall", params={"q": "pair", "team": "platform"}).status_code == 200


def test_json_nested_100k_deep_is_400_and_writes_nothing(services: Services) -> None:
    c = client(services, max_body_bytes=1_000_000)
    for body in ("[" * 100_000 + "]" * 100_000, '{"episodes": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        r = c.post("/episodes", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "nested too deeply" in r.json()["detail"], r.text
    r = c.post(
        "/contradictions/x/resolve", content="[" * 100_000 + "]" * 100_000, headers={"content-type": "application/json"}
    )
    assert 400 <= r.status_code < 500
    assert services.graph.counts().episodes == {}
