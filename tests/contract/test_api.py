"""The HTTP API on the embedded stores (FastAPI's TestClient; real sockets in test_api_server.py
and the worker e2e tests): scopes and tokens, one error shape, a typed schema, and what it does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
from fastapi.testclient import TestClient

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.settings import ApiSettings, load_settings
from taskzilla_sleep.interfaces.api import create_app
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash

NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
TOKEN = "tz-api-token-for-tests"
READER, WRITER, OTHER = "tz-read-platform", "tz-write-platform", "tz-write-ops"
GRANTS = {
    token_hash(READER): {"name": "reader-bot", "teams": ["platform"], "role": "read"},
    token_hash(WRITER): {"name": "support-bot", "teams": ["platform"], "role": "write"},
    token_hash(OTHER): {"name": "ops-bot", "teams": ["ops"], "role": "write"},
}


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides={"api.max_body_bytes": 4096})) as s:
        yield s


def client(
    s: Services,
    token: str | None = None,
    max_body_bytes: int | None = None,
    tokens: dict[str, Any] | None = None,
    default_team: str | None = "platform",
) -> TestClient:
    """The app exactly as the worker serves it (its service, tokens, status and metrics)."""
    api: dict[str, Any] = {"default_team": default_team, "tokens": tokens or {}}
    if max_body_bytes is not None:
        api["max_body_bytes"] = max_body_bytes
    api_settings = ApiSettings.model_validate(s.settings.api.model_dump() | api)
    settings = s.settings.model_copy(update={"api": api_settings})
    worker = Worker(
        Services(settings, s.graph, s.vectors, s.embedder, s.llm),
        ScaledClock(NOW, 0.0),
        api_token=token,
        serve_api=False,
        env={},
    )
    woke: list[int] = []
    worker.memory.on_ingest = lambda: woke.append(1)
    c = TestClient(create_app(worker.api_deps()))
    c.woke = woke  # type: ignore[attr-defined]
    return c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


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


def body(*eps: dict[str, Any]) -> dict[str, Any]:
    return {"episodes": list(eps)}


def test_the_schema_is_one_a_client_can_be_generated_from(services: Services) -> None:
    schema = client(services, tokens=GRANTS).get("/openapi.json").json()
    ops = {op["operationId"]: (path, method) for path, item in schema["paths"].items() for method, op in item.items()}
    for name in (
        "ingestEpisodes",
        "recall",
        "listContradictions",
        "getContradiction",
        "resolveContradiction",
        "listFacts",
        "pinFact",
        "unpinFact",
        "listPatterns",
        "getPattern",
        "getStatus",
        "forget",
        "exportTeam",
        "health",
        "ready",
        "metrics",
    ):
        assert name in ops, name
    assert ops["ingestEpisodes"] == ("/v1/episodes", "post")
    ingest = schema["paths"]["/v1/episodes"]["post"]
    ref = ingest["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    episodes = schema["components"]["schemas"][ref]["properties"]["episodes"]
    episode = schema["components"]["schemas"][episodes["items"]["$ref"].rsplit("/", 1)[1]]
    assert episode["examples"][0]["provenance"] == "human" and "ts" in episode["required"]
    assert "default" not in episode["properties"]["id"]  # optional in a generated client, not "required, null"
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert ingest["security"] == [{"HTTPBearer": []}]
    for status in ("400", "401", "403", "413", "422", "429", "503"):
        assert ingest["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    assert "HTTPValidationError" not in schema["components"]["schemas"]  # one error shape, also for 422
    open_schema = client(services).get("/openapi.json").json()  # no token configured: the token is optional
    assert open_schema["paths"]["/v1/episodes"]["post"]["security"] == [{"HTTPBearer": []}, {}]


def test_ingest_validates_everything_first_and_writes_nothing_on_error(services: Services) -> None:
    c = client(services)
    r = c.post("/v1/episodes", json=body(ep(1), ep(2, provenance="robot"), ep(3, ts="2026-11-27T10:00")))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "invalid" and "nothing was written" in err["message"]
    assert [(e["index"], e["field"]) for e in err["details"]] == [(1, "provenance"), (2, "ts")]
    assert services.graph.counts().episodes == {}
    ok = c.post("/v1/episodes", json=body(ep(1), ep(2)))
    assert ok.status_code == 200 and ok.json()["new"] == 2 and c.woke == [1]  # type: ignore[attr-defined]
    again = c.post("/v1/episodes", json=body(ep(1), ep(2)))
    assert again.json() == {
        "new": 0,
        "present": 2,
        "skipped": 0,
        "skipped_by_connector": {},
        "edited": 0,
        "edits_ignored": 0,
    }
    bare = c.post("/v1/episodes", json=[ep(3)])  # the body is an object with an `episodes` list
    assert bare.status_code == 422 and bare.json()["error"]["details"][0]["field"] == ""


def test_an_edit_replaces_the_text_and_an_older_one_changes_nothing(services: Services) -> None:
    c = client(services, tokens=GRANTS, default_team=None)
    first = ep(1, id="slack-1", text="we deploy on Fridays", thread_id="slack-1")
    reply = ep(2, id="slack-2", text="never on Fridays", reply_to="slack-1", thread_id="slack-1")
    assert c.post("/v1/episodes", json=body(first, reply), headers=bearer(WRITER)).json()["new"] == 2
    clash = c.post("/v1/episodes", json=body(first | {"text": "we deploy on Mondays"}), headers=bearer(WRITER))
    assert clash.status_code == 422 and clash.json()["error"]["details"][0]["field"] == "id"  # no edited_at

    edited = first | {"text": "we deploy on Mondays", "edited_at": "2026-11-27T11:00:00+01:00"}
    r = c.post("/v1/episodes", json=body(edited), headers=bearer(WRITER))

    assert r.status_code == 200 and (r.json()["edited"], r.json()["new"]) == (1, 0), r.text
    (got,) = services.graph.get_episodes(["slack-1"])
    assert got.text == "we deploy on Mondays" and got.edited_at == datetime.fromisoformat("2026-11-27T11:00:00+01:00")
    hits = c.get("/v1/recall", params={"q": "deploy on Mondays", "team": "platform"}, headers=bearer(READER)).json()
    assert any(i["id"] == "slack-1" and i["text"] == "we deploy on Mondays" for i in hits["items"]), hits
    older = edited | {"text": "we deploy on Sundays", "edited_at": "2026-11-27T10:30:00+01:00"}
    late = c.post("/v1/episodes", json=body(older, first), headers=bearer(WRITER))
    assert late.status_code == 200 and (late.json()["edited"], late.json()["present"]) == (0, 1)
    assert services.graph.get_episodes(["slack-1"])[0].text == "we deploy on Mondays"
    assert services.graph.replies("platform") == [("slack-2", "slack-1")]
    bad = c.post("/v1/episodes", json=body(ep(3, edited_at="2026-11-27T09:00:00+01:00")), headers=bearer(WRITER))
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["field"] == "edited_at"


def test_an_id_another_team_holds_is_said_to_be_taken_and_nothing_of_its_message(services: Services) -> None:
    c = client(services, tokens=GRANTS, default_team=None)
    mine = ep(1, id="chat-7", text="the vault password rotates on Mondays", author="secretive")
    assert c.post("/v1/episodes", json=body(mine), headers=bearer(WRITER)).json()["new"] == 1
    for theirs in (
        ep(1, id="chat-7", team="ops", text="standup moved"),
        ep(1, id="chat-7", team="ops", text="standup moved", edited_at="2026-11-27T12:00:00+01:00"),
    ):
        r = c.post("/v1/episodes", json=body(theirs), headers=bearer(OTHER))
        assert r.status_code == 422, r.text
        detail = r.json()["error"]["details"][0]
        assert detail["field"] == "id" and "already used by another message" in detail["reason"]
        shown = r.text.casefold()
        assert all(w not in shown for w in ("vault", "password", "secretive", "platform", "mondays")), r.text
    assert services.graph.get_episodes(["chat-7"])[0].text == "the vault password rotates on Mondays"


def test_tokens_are_scoped_by_team_and_role(services: Services) -> None:
    c = client(services, tokens=GRANTS, default_team=None)
    assert c.post("/v1/episodes", json=body(ep(1))).status_code == 401
    assert c.post("/v1/episodes", json=body(ep(1)), headers=bearer("wrong")).status_code == 401
    assert c.post("/v1/episodes", json=body(ep(1)), headers=bearer(READER)).status_code == 403  # a reader
    assert c.post("/v1/episodes", json=body(ep(1, team="ops")), headers=bearer(WRITER)).status_code == 403
    assert c.post("/v1/episodes", json=body(ep(1)), headers=bearer(WRITER)).json()["new"] == 1
    assert c.post("/v1/episodes", json=body(ep(2, team="ops")), headers=bearer(OTHER)).json()["new"] == 1
    # Reads need a token too, and see only their teams; no team named and no default: 400.
    assert c.get("/v1/recall", params={"q": "pair", "team": "platform"}).status_code == 401
    no_team = c.get("/v1/recall", params={"q": "pair"}, headers=bearer(READER))
    assert no_team.status_code == 400 and "team" in no_team.json()["error"]["message"]
    mine = c.get("/v1/recall", params={"q": "pair", "team": "platform"}, headers=bearer(READER)).json()
    assert mine["team"] == "platform" and {i["team"] for i in mine["items"]} == {"platform"}
    theirs = c.get("/v1/recall", params={"q": "pair", "team": "ops"}, headers=bearer(READER))
    assert theirs.status_code == 403 and theirs.json()["error"]["code"] == "forbidden"
    assert c.get("/v1/status", headers=bearer(WRITER)).status_code == 403  # every team's sizes: admin only
    assert c.get("/healthz").json() == {"ok": True}  # probes need no token


def test_the_env_token_is_an_admin_of_every_team_and_the_scheme_is_case_insensitive(services: Services) -> None:
    c = client(services, token=TOKEN)
    for scheme in ("bearer", "BEARER", "Bearer", "bEaReR"):
        r = c.post("/v1/episodes", json=body(ep(1)), headers={"Authorization": f"{scheme} {TOKEN}"})
        assert r.status_code == 200, (scheme, r.text)
    for header in (f"Basic {TOKEN}", f"Bearer {TOKEN.upper()}", f"Bearer{TOKEN}", TOKEN, f"Bearer {TOKEN}x"):
        r = c.post("/v1/episodes", json=body(ep(2)), headers={"Authorization": header})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", header
    assert services.graph.counts().episodes == {"raw": 1}
    assert c.get("/v1/status", headers=bearer(TOKEN)).status_code == 200


def test_bodies_over_the_limit_are_refused_in_the_error_shape(services: Services) -> None:
    c = client(services)
    big = json.dumps(body(*(ep(i, text="x" * 500) for i in range(20))))
    r = c.post("/v1/episodes", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    chunks = (big[i : i + 1000].encode() for i in range(0, len(big), 1000))  # no Content-Length
    r = c.post("/v1/episodes", content=chunks, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert services.graph.counts().episodes == {}


def test_recall_contradictions_resolve_and_facts(services: Services) -> None:
    services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
    assert run_night(services, NightRequest(now=NOW)).ok
    c = client(services, tokens=GRANTS)
    items = c.get("/v1/recall", params={"q": "deploy on friday", "k": 2}, headers=bearer(READER)).json()["items"]
    assert items[0]["kind"] == "pattern" and "friday" in items[0]["text"].casefold()
    first = items[0]
    assert first["confidence"] is not None and first["similarity"] is not None and first["evidence_count"] >= 1
    prompt = c.get(
        "/v1/recall", params={"q": "deploy on friday", "format": "prompt", "budget": 200}, headers=bearer(READER)
    ).json()["prompt"]
    assert json.dumps(first["text"]) in prompt and len(prompt) <= 200 * 4
    pats = c.get("/v1/patterns", headers=bearer(READER)).json()
    assert pats and {p["id"] for p in pats} >= {first["id"]}
    shown = c.get(f"/v1/patterns/{first['id']}", headers=bearer(READER)).json()
    assert len(shown["evidence"]) == first["evidence_count"]
    assert c.get(f"/v1/patterns/{first['id']}", params={"team": "ops"}, headers=bearer(OTHER)).status_code == 404
    (con,) = c.get("/v1/contradictions", headers=bearer(READER)).json()
    cid = con["contradiction"]["id"]
    assert con["contradiction"]["kind"] == "update" and "async" in con["old"].casefold()
    assert c.get(f"/v1/contradictions/{cid}", headers=bearer(READER)).json() == con
    assert c.get(f"/v1/contradictions/{cid}", headers=bearer(OTHER)).status_code == 404  # another team's
    bad = c.post(f"/v1/contradictions/{cid}/resolve", json={"keep": "maybe"}, headers=bearer(WRITER))
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["field"] == "keep"
    by = c.post(f"/v1/contradictions/{cid}/resolve", json={"keep": "new", "by": "x"}, headers=bearer(WRITER))
    assert by.status_code == 422  # who decides is the token's name, not a field anyone can type
    assert c.post(f"/v1/contradictions/{cid}/resolve", json={"keep": "both"}, headers=bearer(READER)).status_code == 403
    done = c.post(
        f"/v1/contradictions/{cid}/resolve", json={"keep": "both", "note": "both hold"}, headers=bearer(WRITER)
    )
    assert done.status_code == 200 and (done.json()["resolution"], done.json()["resolved_by"]) == (
        "both",
        "support-bot",
    )
    for repeat in ({"keep": "both"}, {"keep": "both", "note": "both hold"}):  # a retry: the recorded resolution
        same = c.post(f"/v1/contradictions/{cid}/resolve", json=repeat, headers=bearer(WRITER))
        assert same.status_code == 200, same.text
        at = lambda r: datetime.fromisoformat(r.json().pop("resolved_at"))  # noqa: E731  (stored as UTC)
        assert at(same) == at(done) and same.json() | {"resolved_at": 0} == done.json() | {"resolved_at": 0}
    for other in ({"keep": "new"}, {"keep": "both", "note": "another reason"}):  # another decision
        again = c.post(f"/v1/contradictions/{cid}/resolve", json=other, headers=bearer(WRITER))
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    missing = c.post("/v1/contradictions/nope/resolve", json={"keep": "new"}, headers=bearer(WRITER))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    resolved = c.get("/v1/contradictions", params={"status": "resolved"}, headers=bearer(READER)).json()
    assert resolved[0]["contradiction"]["note"] == "both hold"

    fact = c.post("/v1/facts", json={"text": "Lea is on call this week", "entity": "lea"}, headers=bearer(WRITER))
    assert fact.status_code == 200 and fact.json()["pinned_by"] == "support-bot"
    fid = fact.json()["id"]
    assert [f["id"] for f in c.get("/v1/facts", headers=bearer(READER)).json()] == [fid]
    assert c.delete(f"/v1/facts/{fid}", headers=bearer(OTHER)).status_code == 404
    assert c.delete(f"/v1/facts/{fid}", headers=bearer(WRITER)).json()["archived_by"] == "support-bot"
    assert c.get("/readyz").json()["ready"] is True
    assert c.get("/metrics").text.startswith("#")


def test_every_write_is_audited_with_who_what_and_which_ids(services: Services) -> None:
    c = client(services, tokens=GRANTS)
    with structlog.testing.capture_logs() as logs:
        assert c.post("/v1/episodes", json=body(ep(1), ep(2)), headers=bearer(WRITER)).status_code == 200
        c.post("/v1/facts", json={"text": "the build server is ci-3"}, headers=bearer(WRITER))
    audits = [e for e in logs if e["event"] == "audit"]
    assert [(a["who"], a["action"], a["team"], a["n"]) for a in audits] == [
        ("support-bot", "ingest", "platform", 2),
        ("support-bot", "pin", "platform", 1),
    ]
    assert all(i.startswith("ep_") for i in audits[0]["ids"])
    assert WRITER not in json.dumps(logs)  # the token itself is never logged


def test_the_audit_trail_is_for_admins_each_seeing_their_teams(services: Services) -> None:
    admins = {
        token_hash("tz-admin-all"): {"name": "ops-lead", "teams": ["*"], "role": "admin"},
        token_hash("tz-admin-ops"): {"name": "ops-admin", "teams": ["ops"], "role": "admin"},
    }
    c = client(services, tokens=GRANTS | admins)
    assert c.post("/v1/episodes", json=body(ep(1)), headers=bearer(WRITER)).status_code == 200
    assert (
        c.post("/v1/facts", json={"text": "ops deploys on Mondays", "team": "ops"}, headers=bearer(OTHER)).status_code
        == 200
    )
    everyone = c.get("/v1/audit", headers=bearer("tz-admin-all"))
    assert everyone.status_code == 200, everyone.text
    assert [(r["who"], r["role"], r["action"], r["team"]) for r in everyone.json()] == [
        ("ops-bot", "write", "pin", "ops"),
        ("support-bot", "write", "ingest", "platform"),
    ]
    assert everyone.json()[1]["ids"][0].startswith("ep_") and everyone.json()[1]["present"] == 0
    ops = c.get("/v1/audit", headers=bearer("tz-admin-ops")).json()
    assert [r["action"] for r in ops] == ["pin"]
    assert c.get("/v1/audit", params={"team": "platform"}, headers=bearer("tz-admin-ops")).status_code == 403
    assert c.get("/v1/audit", headers=bearer(WRITER)).status_code == 403
    one = c.get("/v1/audit", params={"action": "ingest", "limit": 1}, headers=bearer("tz-admin-all")).json()
    assert [r["action"] for r in one] == ["ingest"]
    later = c.get("/v1/audit", params={"since": "2999-01-01T00:00:00+00:00"}, headers=bearer("tz-admin-all"))
    assert later.json() == []
    for bad in ({"since": "2026-12-01T09:00:00"}, {"limit": 0}, {"action": "DROP TABLE"}):
        r = c.get("/v1/audit", params=bad, headers=bearer("tz-admin-all"))
        assert r.status_code == 422, (bad, r.text)
    assert "tz-admin-all" not in (services.settings.data_dir / "audit.jsonl").read_text()


def test_recall_with_a_team_that_cannot_exist_is_422(services: Services) -> None:
    c = client(services)
    for team in ("a b", "../x", "é", "x" * 49):
        r = c.get("/v1/recall", params={"q": "pair", "team": team})
        assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "team", (team, r.text)
    assert c.get("/v1/recall", params={"q": "pair", "team": "platform"}).status_code == 200


def test_json_nested_100k_deep_is_400_and_writes_nothing(services: Services) -> None:
    c = client(services, max_body_bytes=1_000_000)
    for raw in ("[" * 100_000 + "]" * 100_000, '{"episodes": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        r = c.post("/v1/episodes", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text
    assert c.post("/v1/episodes", content="{not json", headers={"content-type": "application/json"}).status_code == 400
    r = c.post(
        "/v1/contradictions/x/resolve",
        content="[" * 100_000 + "]" * 100_000,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
    assert services.graph.counts().episodes == {}


def test_forget_and_export_over_the_api(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
    assert run_night(services, NightRequest(now=NOW)).ok
    c = client(services, token=TOKEN, tokens=GRANTS)
    assert c.get("/v1/export", headers=bearer(WRITER)).status_code == 403  # every raw message: admin only
    exported = c.get("/v1/export", params={"team": "platform"}, headers=bearer(TOKEN))
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in exported.text.splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["team"] == "platform"
    assert sum(x["type"] == "episode" for x in lines) == sum(services.graph.counts().episodes.values())

    first = c.get("/v1/recall", params={"q": "deploy on friday", "k": 1}, headers=bearer(READER)).json()["items"][0]
    author = c.get(f"/v1/patterns/{first['id']}", headers=bearer(READER)).json()["evidence"][0]["author"]
    two = {"author": author, "pattern_id": first["id"], "reason": "asked"}
    assert c.post("/v1/forget", json=two, headers=bearer(WRITER)).status_code == 422  # exactly one target
    ask = {"author": author, "reason": "left the team and asked"}
    assert c.post("/v1/forget", json=ask, headers=bearer(READER)).status_code == 403
    assert c.post("/v1/forget", json=ask | {"team": "ops"}, headers=bearer(WRITER)).status_code == 403
    done = c.post("/v1/forget", json=ask, headers=bearer(WRITER))
    assert done.status_code == 200, done.text
    report = done.json()
    assert report["by"] == "support-bot" and report["episodes_forgotten"]
    stones = {t.id: t for t in services.graph.tombstones("platform")}
    assert all(stones[i].by == "support-bot" for i in report["episodes_forgotten"])
    left = c.get("/v1/recall", params={"q": "deploy on friday", "k": 20}, headers=bearer(READER)).json()["items"]
    assert all(i["author"] != author for i in left if i["kind"] == "episode")
    again = c.post("/v1/forget", json=ask, headers=bearer(WRITER)).json()  # a retry is harmless
    assert again["episodes_forgotten"] == [] and set(again["episodes_already_forgotten"]) == set(
        report["episodes_forgotten"]
    )

    # A forget never lands inside a night: it waits for the lease, then answers 429 with Retry-After.
    from taskzilla_sleep.runtime.lease import LEASE_NAME, Lease

    monkeypatch.setattr("taskzilla_sleep.interfaces.worker.FORGET_WAIT_S", 0.3)
    night = Lease(services.graph, LEASE_NAME, 60, me="night@test")
    assert night.try_acquire()
    try:
        busy = c.post("/v1/forget", json={"pattern_id": first["id"], "reason": "wrong"}, headers=bearer(WRITER))
        assert busy.status_code == 429 and int(busy.headers["Retry-After"]) >= 1
        assert "night@test" in busy.json()["error"]["message"]
    finally:
        night.release()
    gone = c.post("/v1/forget", json={"pattern_id": first["id"], "reason": "wrong"}, headers=bearer(WRITER))
    assert gone.status_code == 200 and gone.json()["patterns_forgotten"] == [first["id"]]
    assert c.get(f"/v1/patterns/{first['id']}", headers=bearer(READER)).status_code == 404
