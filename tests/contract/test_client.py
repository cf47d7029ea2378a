"""The Python client (``taskzilla_sleep.client``) against the app as the worker serves it (FastAPI's
TestClient as its transport, embedded stores): every operation answers the package's own models,
and every failure is one ``ApiError`` parsed from the error shape. Over a real socket: tests/e2e."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from fastapi.testclient import TestClient

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.client import ApiError, Client
from taskzilla_sleep.core.models import Contradiction, EpisodeIn, Pattern, PatternStatus, Provenance
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.api.schemas import IngestResult, RecallResult
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.memory.admin import ForgetReport, PatternDetail, PatternSummary
from taskzilla_sleep.memory.recall import RecallItem
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.service.memory_service import ContradictionView
from tests.contract.test_api import GRANTS, NOW, OTHER, READER, TOKEN, WRITER, client, ep


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """The sample week after its night: beliefs, and one open contradiction in team platform."""
    data = tmp_path_factory.mktemp("client")
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(data)})) as s:
        s.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
        assert run_night(s, NightRequest(now=NOW)).ok
        yield s


class Via(httpx.BaseTransport):
    """The client's requests through FastAPI's TestClient: the app in this process, no socket."""

    def __init__(self, app: TestClient) -> None:
        self.app = app

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        got = self.app.request(request.method, str(request.url), headers=request.headers, content=request.read())
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)


def connect(s: Services, token: str | None, team: str | None = "platform") -> Client:
    app = client(s, token=TOKEN, tokens=GRANTS, default_team=None)
    return Client("http://testserver", token=token, team=team, transport=Via(app))


def test_reads_answer_the_packages_models(seeded: Services) -> None:
    tz = connect(seeded, READER)
    assert tz.health().ok and tz.ready().ready and tz.metrics().startswith("#")
    got = tz.recall("deploy on friday", k=3, format="prompt", budget=200)
    assert isinstance(got, RecallResult) and got.team == "platform"
    assert all(isinstance(i, RecallItem) and i.team == "platform" for i in got.items)
    assert got.items[0].kind == "pattern" and got.prompt is not None and json.dumps(got.items[0].text) in got.prompt
    assert tz.recall("deploy on friday").prompt is None
    assert all(i.superseded is False for i in tz.recall("standup", include=["drafts", "superseded"]).items)
    pats = tz.patterns(status=PatternStatus.ACTIVE, limit=100)
    assert pats and all(isinstance(p, PatternSummary) and p.status is PatternStatus.ACTIVE for p in pats)
    detail = tz.pattern(got.items[0].id)
    assert isinstance(detail, PatternDetail) and len(detail.evidence) == got.items[0].evidence_count
    (view,) = tz.contradictions()
    assert isinstance(view, ContradictionView) and view.contradiction.kind == "update"
    assert tz.contradiction(view.contradiction.id) == view
    assert tz.contradictions("resolved") == [] and tz.facts() == []
    assert repr(tz) == "Client('http://testserver', team='platform')"  # never the token


def test_writes_answer_the_packages_models_and_record_the_tokens_name(seeded: Services) -> None:
    tz = connect(seeded, WRITER)
    eps = [
        EpisodeIn(
            team="platform",
            channel="dev",
            author="guest",
            text=f"we pair on release days, note {i}",
            ts=datetime.fromisoformat("2026-11-28T02:00:00+01:00"),
            provenance=Provenance.HUMAN,
        )
        for i in range(2)
    ]
    assert tz.ingest(eps) == IngestResult(new=2, present=0, skipped=0, skipped_by_connector={})
    assert tz.ingest([ep(9), eps[0]]).model_dump() == {
        "new": 1,
        "present": 1,
        "skipped": 0,
        "skipped_by_connector": {},
        "edited": 0,
        "edits_ignored": 0,
    }
    # Threads and edits: the package's own model carries them; a newer edit replaces the text.
    reply = eps[1].model_copy(
        update={"id": "guest-reply-1", "author": "visitor", "reply_to": "guest-q-1", "thread_id": "guest-q-1"}
    )
    assert tz.ingest([reply]).new == 1
    edit = reply.model_copy(update={"text": "we pair on release days, always", "edited_at": NOW})
    assert tz.ingest([edit]).edited == 1
    (stored,) = seeded.graph.get_episodes(["guest-reply-1"])
    assert (stored.text, stored.reply_to, stored.edited_at) == ("we pair on release days, always", "guest-q-1", NOW)
    assert tz.ingest([edit.model_copy(update={"text": "older", "edited_at": reply.ts})]).edited == 0
    (view,) = tz.contradictions()
    done = tz.resolve(view.contradiction.id, "new", note="we moved to a call")
    assert isinstance(done, Contradiction) and (done.resolution, done.resolved_by) == ("new", "support-bot")
    fact = tz.pin("Lea is on call this week", entity="lea")
    assert isinstance(fact, Pattern) and fact.pinned_by == "support-bot"
    assert [f.id for f in tz.facts()] == [fact.id]
    assert tz.unpin(fact.id).archived_by == "support-bot"
    report = tz.forget("asked to be forgotten", author="guest")
    assert isinstance(report, ForgetReport) and len(report.episodes_forgotten) == 2 and report.by == "support-bot"
    admin = connect(seeded, TOKEN)
    lines = admin.export()
    assert lines[0]["type"] == "header" and lines[0]["team"] == "platform"
    assert admin.status()["sizes"]["episodes_total"] > 0


def test_every_refusal_is_one_api_error_with_the_error_shape(seeded: Services) -> None:
    reader, writer = connect(seeded, READER), connect(seeded, WRITER)
    cases: list[tuple[Any, int, str]] = [
        (lambda: connect(seeded, None).recall("x"), 401, "unauthorized"),
        (lambda: connect(seeded, "wrong").recall("x"), 401, "unauthorized"),
        (lambda: reader.ingest([ep(1)]), 403, "forbidden"),
        (lambda: reader.recall("x", team="ops"), 403, "forbidden"),
        (lambda: connect(seeded, READER, team=None).recall("x"), 400, "bad_request"),
        (lambda: reader.pattern("pat_nope"), 404, "not_found"),
        (
            lambda: connect(seeded, OTHER, team="ops").contradiction(
                reader.contradictions("resolved")[0].contradiction.id
            ),
            404,
            "not_found",
        ),
        (lambda: writer.resolve(writer.contradictions("resolved")[0].contradiction.id, "old"), 409, "conflict"),
        (lambda: writer.forget("x", author="a", pattern_id="p"), 422, "invalid"),
        (lambda: writer.status(), 403, "forbidden"),
        (lambda: reader.export(), 403, "forbidden"),
    ]
    for call, status, code in cases:
        with pytest.raises(ApiError) as err:
            call()
        assert (err.value.status, err.value.code) == (status, code), err.value
        assert READER not in str(err.value) and WRITER not in str(err.value)
    with pytest.raises(ApiError) as bad:
        writer.ingest([ep(1), ep(2, provenance="robot"), ep(3, ts="2026-11-27T10:00")])
    assert [(d.index, d.field) for d in bad.value.details] == [(1, "provenance"), (2, "ts")]
    assert "nothing was written" in bad.value.message


def test_busy_and_foreign_answers_and_an_unreachable_worker() -> None:
    busy = httpx.Response(
        429,
        headers={"Retry-After": "7"},
        json={"error": {"code": "busy", "message": "a night holds the memory", "details": None}},
    )
    err = ApiError.of(busy)
    assert (err.status, err.code, err.retry_after, err.details) == (429, "busy", 7.0, [])
    proxy = ApiError.of(httpx.Response(502, text="<html>Bad Gateway</html>"))
    assert (proxy.status, proxy.code) == (502, "http_502") and "Bad Gateway" in proxy.message
    with structlog.testing.capture_logs() as logs, pytest.raises(ApiError) as down:
        Client("http://127.0.0.1:1", token="tz-secret-never-logged", timeout=2).health()
    assert (down.value.status, down.value.code) == (0, "unreachable")
    assert "tz-secret-never-logged" not in str(down.value) + json.dumps(logs, default=str)


def test_the_client_sends_ids_as_one_path_segment(tmp_path: Path) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no pattern", "details": None}})

    tz = Client("http://w", transport=httpx.MockTransport(answer), team="platform")
    with pytest.raises(ApiError):
        tz.pattern("../status?x=1")
    assert seen == ["/v1/patterns/..%2Fstatus%3Fx%3D1?team=platform"]
