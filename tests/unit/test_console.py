"""The memory console (/ui) on the in-memory stores, through the app the worker serves (TestClient):
login, CSRF, roles and teams, escaping, and that every action lands in the store as /v1 would.
The browser test (tests/e2e/test_console.py) clicks through the same pages on the real stores."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from html import unescape as html_unescape
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.app import Services
from taskzilla_sleep.core.models import (
    Contradiction,
    ContradictionKind,
    EpisodeIn,
    EpisodeStatus,
    Pattern,
    PatternKind,
    PatternStatus,
)
from taskzilla_sleep.core.settings import AlertChannel, ApiSettings, Settings
from taskzilla_sleep.interfaces.api import create_app
from taskzilla_sleep.interfaces.console import console_router
from taskzilla_sleep.interfaces.console.sessions import COOKIE, Sessions
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import OPEN, Tokens, token_hash
from taskzilla_sleep.service import audit_trail as audit
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.records import ChangeRecord, Retirement

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
ADMIN, WRITER, READER, OTHER = "tz-admin-token", "tz-writer-token", "tz-reader-token", "tz-ops-writer"
GRANTS = {
    token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"},
    token_hash(WRITER): {"name": "dana", "teams": ["platform"], "role": "write"},
    token_hash(READER): {"name": "viewer", "teams": ["platform"], "role": "read"},
    token_hash(OTHER): {"name": "ops-bot", "teams": ["ops"], "role": "write"},
}
XSS = "<script>alert('x')</script> deploys need two reviewers"


class Console:
    def __init__(self, worker: Worker, graph: MemoryGraphStore) -> None:
        self.worker = worker
        self.graph = graph
        self.cid = seed(worker)

    def client(self) -> TestClient:
        return TestClient(create_app(self.worker.api_deps()), base_url="http://127.0.0.1", follow_redirects=False)


def seed(worker: Worker) -> str:
    """Two beliefs of team platform, each with three messages, and an open contradiction between them."""
    eps = [
        EpisodeIn(
            team="platform",
            channel="deploys",
            author=author,
            text=text,
            ts=NOW - timedelta(hours=10 - i),
            provenance="human",
        )
        for i, (author, text) in enumerate(
            [
                ("sara", "one reviewer is enough for a deploy"),
                ("lena", "a single review will do for deploys"),
                ("omar", "one approval and ship it"),
                ("martin", "deploys need two reviewers from now on"),
                ("sara", "two reviewers for every deploy, please"),
                ("lena", "remember: two approvals before a deploy"),
            ]
        )
    ]
    ids = worker.memory.ingest(OPEN, eps).new_ids
    assert len(ids) == 6
    graph = worker.services.graph
    for pid, statement, evidence, at in (
        ("p-old", "One reviewer is enough for a deploy", ids[:3], NOW - timedelta(days=3)),
        ("p-new", XSS, ids[3:], NOW - timedelta(hours=1)),
    ):
        graph.write_pattern(
            Pattern(
                id=pid,
                team="platform",
                statement=statement,
                kind=PatternKind.PROCESS,
                status=PatternStatus.ACTIVE,
                confidence=0.8,
                evidence_ids=list(evidence),
                support_count=3,
                distinct_authors=3,
                distinct_channels=1,
                first_seen=at,
                last_seen=at,
                created_at=at,
                updated_at=at,
                valid_from=at,
                topic="deploys",
            ),
            [],
            [],
        )
    c = Contradiction(
        id="con-1",
        team="platform",
        old_pattern_id="p-old",
        new_pattern_id="p-new",
        kind=ContradictionKind.UPDATE,
        opened_at=NOW,
        reason="the rule changed",
    )
    graph.open_contradiction(c, counter=0, old_confidence=0.8)
    return c.id


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    settings = Settings(data_dir=tmp_path, api=ApiSettings.model_validate({"tokens": GRANTS}))
    graph = MemoryGraphStore()
    services = Services(settings, graph, MemoryVectorStore(), HashEmbedder())
    worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=False, env={})
    try:
        yield Console(worker, graph)
    finally:
        worker._shutdown()


def login(c: TestClient, token: str) -> str:
    """Log in through the form; returns the page's CSRF token."""
    form = c.get("/ui/login")
    assert form.status_code == 200
    nonce = csrf_of(form.text)
    done = c.post("/ui/login", data={"token": token, "csrf": nonce, "next": "/ui/contradictions"})
    assert done.status_code == 303, done.text
    return csrf_of(c.get("/ui/contradictions").text)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def status_of(console: Console) -> str:
    return console.graph.get_contradiction(console.cid).status.value


def test_a_logged_out_browser_is_sent_to_the_login_form(console: Console) -> None:
    c = console.client()
    for path in ("/ui/contradictions", "/ui/patterns?q=x", "/ui/facts", "/ui/nights", "/ui/alerts", "/ui/status"):
        r = c.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login?next=%2Fui%2F"), path
    assert c.get("/ui/login").status_code == 200
    post = c.post(f"/ui/contradictions/{console.cid}/resolve", data={"keep": "new", "csrf": "x"})
    assert post.status_code == 303 and post.headers["location"].startswith("/ui/login")
    assert status_of(console) == "open"


def test_a_wrong_token_is_refused_and_no_session_is_given(console: Console) -> None:
    c = console.client()
    nonce = csrf_of(c.get("/ui/login").text)
    r = c.post("/ui/login", data={"token": "not-a-token", "csrf": nonce})
    assert r.status_code == 401 and "matches no configured token" in r.text
    assert COOKIE not in c.cookies
    assert c.get("/ui/contradictions").status_code == 303
    # The login form itself carries a CSRF value bound to the browser's cookie.
    fresh = console.client()
    r = fresh.post("/ui/login", data={"token": WRITER, "csrf": "forged"})
    assert r.status_code == 403 and COOKIE not in fresh.cookies


def test_the_session_cookie_is_random_httponly_and_strict(console: Console) -> None:
    c = console.client()
    nonce = csrf_of(c.get("/ui/login").text)
    r = c.post("/ui/login", data={"token": WRITER, "csrf": nonce, "next": "https://evil.example/"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/contradictions"  # no open redirect
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith(COOKIE + "="))
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    assert len(value) >= 40 and WRITER not in value and token_hash(WRITER) not in value
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert "Secure" not in cookie  # plain http on loopback; https sets Secure
    page = c.get("/ui/contradictions")
    assert page.headers["content-security-policy"].startswith("default-src 'self'; script-src 'none'")
    assert "dana" in page.text and "<script" not in page.text.replace("&lt;script", "")
    https = TestClient(create_app(console.worker.api_deps()), base_url="https://127.0.0.1", follow_redirects=False)
    nonce = csrf_of(https.get("/ui/login").text)
    r = https.post("/ui/login", data={"token": WRITER, "csrf": nonce})
    assert "Secure" in next(h for h in r.headers.get_list("set-cookie") if h.startswith(COOKIE + "="))


def test_a_post_without_the_csrf_token_is_refused_and_writes_nothing(console: Console) -> None:
    c = console.client()
    csrf = login(c, WRITER)
    for data in ({"keep": "new"}, {"keep": "new", "csrf": csrf[:-1] + "A" if csrf[-1] != "A" else csrf[:-1] + "B"}):
        r = c.post(f"/ui/contradictions/{console.cid}/resolve", data=data)
        assert r.status_code == 403 and "CSRF" in r.text
    assert status_of(console) == "open"
    assert c.post("/ui/facts", data={"text": "Lea is on call", "team": "platform"}).status_code == 403
    assert console.graph.patterns("platform") and not [p for p in console.graph.patterns("platform") if p.pinned]
    assert c.post("/ui/logout", data={}).status_code == 403  # logging out is a POST with the token too


def test_the_queue_shows_both_beliefs_with_people_and_messages_escaped(console: Console) -> None:
    c = console.client()
    login(c, READER)
    page = c.get("/ui/contradictions").text
    assert "A change to confirm" in page and "One reviewer is enough for a deploy" in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; deploys need two reviewers" in page
    assert "<script>" not in page
    shown = re.sub(r"<[^>]+>", "", page)  # the text a person reads
    assert "lena, martin, sara" in shown and "lena, omar, sara" in shown  # the people on each side
    assert '<a href="/ui/entities/person/martin?team=platform">martin</a>' in page  # each with their page
    assert "two approvals before a deploy" in page and "one approval and ship it" in page
    assert "read-only" in page and 'value="new"' not in page  # a viewer gets no buttons…


def test_a_viewer_cannot_resolve_nor_see_admin_pages(console: Console) -> None:
    c = console.client()
    csrf = login(c, READER)
    r = c.post(f"/ui/contradictions/{console.cid}/resolve", data={"keep": "new", "csrf": csrf})
    assert (
        r.status_code == 403 and "token &#39;viewer&#39; has role read; this needs write" in r.text
    )  # …nor a way around
    assert status_of(console) == "open"
    for path in ("/ui/nights", "/ui/alerts", "/ui/status"):
        assert c.get(path).status_code == 403, path
    assert c.get("/ui/contradictions?team=ops").status_code == 403  # not its team


def test_another_teams_token_sees_nothing_of_platform(console: Console) -> None:
    c = console.client()
    csrf = login(c, OTHER)
    page = c.get("/ui/contradictions").text
    assert "Nothing to decide" in page and "reviewer" not in page
    r = c.post(f"/ui/contradictions/{console.cid}/resolve", data={"keep": "old", "csrf": csrf})
    assert r.status_code == 404  # another team's contradiction does not exist for it
    assert status_of(console) == "open"


def test_a_writer_resolves_by_clicking_keep_new(console: Console) -> None:
    c = console.client()
    csrf = login(c, WRITER)
    bad = c.post(f"/ui/contradictions/{console.cid}/resolve", data={"keep": "maybe", "csrf": csrf})
    assert bad.status_code == 422 and "keep" in bad.text and "nothing was written" in bad.text
    assert status_of(console) == "open"
    r = c.post(
        f"/ui/contradictions/{console.cid}/resolve",
        data={"keep": "new", "note": "we moved to two", "csrf": csrf, "back": "/ui/contradictions?team=platform"},
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui/contradictions?team=platform"
    done = console.graph.get_contradiction(console.cid)
    assert (done.status.value, done.resolution, done.resolved_by, done.note) == (
        "resolved",
        "new",
        "dana",
        "we moved to two",
    )
    page = c.get("/ui/contradictions?team=platform").text
    assert "resolved con-1: kept new (by dana)" in page and "Nothing to decide" in page
    assert "we moved to two" in c.get("/ui/contradictions?status=resolved").text


def test_patterns_search_detail_and_forget(console: Console) -> None:
    c = console.client()
    csrf = login(c, WRITER)
    hits = c.get("/ui/patterns", params={"q": "REVIEWER", "kind": "process", "topic": "deploys"})
    assert hits.status_code == 200 and "2 patterns" in hits.text
    contested = c.get("/ui/patterns", params={"q": "REVIEWER", "status": "contested"}).text
    assert "1 pattern" in contested and "One reviewer is enough" in contested  # the old side of the update
    assert "0 patterns" in c.get("/ui/patterns", params={"q": "reviewer", "kind": "norm"}).text
    one = c.get("/ui/patterns", params={"q": "enough"}).text
    assert "1 pattern" in one and "One reviewer is enough" in one and "two reviewers" not in one
    assert c.get("/ui/patterns", params={"status": "sleepy"}).status_code == 422
    detail = c.get("/ui/patterns/p-old", params={"team": "platform"}).text
    assert "Evidence timeline (3)" in detail
    assert detail.index("one reviewer is enough") < detail.index("one approval and ship it")  # oldest first
    assert c.get("/ui/patterns/nope", params={"team": "platform"}).status_code == 404
    empty = c.post("/ui/patterns/p-old/forget", data={"team": "platform", "reason": "", "csrf": csrf})
    assert empty.status_code == 422 and "reason" in empty.text
    assert console.graph.patterns_by_id(["p-old"])
    gone = c.post("/ui/patterns/p-old/forget", data={"team": "platform", "reason": "wrong rule", "csrf": csrf})
    assert gone.status_code == 303 and console.graph.patterns_by_id(["p-old"]) == []


def test_pin_and_unpin_a_fact(console: Console) -> None:
    c = console.client()
    csrf = login(c, WRITER)
    assert c.post("/ui/facts", data={"team": "platform", "text": "", "csrf": csrf}).status_code == 422
    r = c.post(
        "/ui/facts", data={"team": "platform", "text": "Lea is on call this week", "entity": "lea", "csrf": csrf}
    )
    assert r.status_code == 303
    (fact,) = [p for p in console.graph.patterns("platform") if p.pinned]
    assert fact.pinned_by == "dana" and "Lea is on call this week" in c.get("/ui/facts").text
    assert c.post(f"/ui/facts/{fact.id}/unpin", data={"csrf": csrf}).status_code == 303
    (after,) = console.worker.memory.facts(OPEN, "platform")  # kept, as history: unpinned by whom and when
    assert after.status is PatternStatus.RETIRED and after.archived_by == "dana"
    page = c.get("/ui/facts").text
    assert "unpinned by dana" in page and f"/ui/facts/{fact.id}/unpin" not in page
    again = c.post(f"/ui/facts/{fact.id}/unpin", data={"csrf": csrf})
    assert again.status_code == 409 and "already unpinned" in again.text


def test_admin_pages_nights_alerts_status(console: Console) -> None:
    c = console.client()
    login(c, ADMIN)
    nights = c.get("/ui/nights")
    assert nights.status_code == 200 and "Health" in nights.text and "open contradictions" in nights.text
    assert c.get("/ui/nights?runs=0").status_code == 422
    alerts = c.get("/ui/alerts?status=failed")
    assert alerts.status_code == 200 and "No alerts failed" in alerts.text
    assert c.get("/ui/alerts?status=lost").status_code == 422
    status = c.get("/ui/status")
    assert status.status_code == 200 and "open contradictions" in status.text and "No runs yet" in status.text
    page = c.get("/ui/contradictions").text  # an every-team admin picks among the teams in the store
    assert '<option value="platform" selected>' in page


def test_the_audit_page_shows_admins_who_decided_what(console: Console) -> None:
    sink = audit.install(audit.AuditLog(console.worker.settings.data_dir / audit.AUDIT_FILE))
    try:
        writer = console.client()
        csrf = login(writer, WRITER)
        note = "<script>alert(1)</script> checked"
        r = writer.post(f"/ui/contradictions/{console.cid}/resolve", data={"keep": "new", "note": note, "csrf": csrf})
        assert r.status_code == 303
        assert writer.get("/ui/audit").status_code == 403  # admins only, as GET /v1/audit
        admin = console.client()
        login(admin, ADMIN)
        page = admin.get("/ui/audit")
        assert page.status_code == 200 and 'href="/ui/audit" class="here"' in page.text
        row = re.search(r"<tr><td><time[^\n]*\n.*?</tr>", page.text, re.DOTALL)
        assert row is not None and "dana" in row.group(0) and "resolve" in row.group(0) and console.cid in row.group(0)
        assert "&lt;script&gt;alert(1)&lt;/script&gt; checked" in page.text and "<script>" not in page.text
        assert "No decisions on record for this filter" in admin.get("/ui/audit", params={"action": "pin"}).text
        assert admin.get("/ui/audit", params={"action": "Robert'); DROP"}).status_code == 422
        assert admin.get("/ui/audit", params={"team": "ops"}).status_code == 200
    finally:
        audit.uninstall(sink)


def test_an_admin_requeues_a_failed_alert_and_a_writer_cannot(console: Console) -> None:
    outbox = Outbox(console.graph)
    outbox.sync_contradictions({"ops": AlertChannel(kind="webhook", url_env="HOOK")}, NOW)
    assert outbox.mark_failed_attempt("con-1:ops", NOW, "HTTP 404: no_service", NOW, give_up=True)
    writer = console.client()
    wcsrf = login(writer, WRITER)
    assert writer.get("/ui/alerts").status_code == 403
    assert writer.post("/ui/alerts/con-1:ops/requeue", data={"csrf": wcsrf}).status_code == 403
    assert outbox.failed_count() == 1
    c = console.client()
    csrf = login(c, ADMIN)
    page = c.get("/ui/alerts", params={"status": "failed"}).text
    assert "con-1:ops" in page and "HTTP 404: no_service" in page
    action = re.search(r'action="(/ui/alerts/[^"]+/requeue)"', page)
    assert action is not None
    r = c.post(action.group(1), data={"csrf": csrf, "back": "/ui/alerts?status=failed"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/alerts?status=failed"
    assert (outbox.failed_count(), outbox.pending_count()) == (0, 1)
    after = c.get("/ui/alerts", params={"status": "failed"}).text
    assert "requeued 1 alert(s): con-1:ops" in after and "No alerts failed" in after
    assert c.post("/ui/alerts/nope:ops/requeue", data={"csrf": csrf}).status_code == 404


def test_logout_ends_the_session(console: Console) -> None:
    c = console.client()
    csrf = login(c, WRITER)
    r = c.post("/ui/logout", data={"csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert c.get("/ui/contradictions").status_code == 303


def test_sessions_expire_when_idle() -> None:
    now = [1_000.0]
    store = MemoryGraphStore()
    sessions = Sessions(store, clock=lambda: now[0], idle_s=60)
    s = sessions.start(OPEN)
    got = sessions.get(s.id)
    assert got is not None and (got.access, got.csrf) == (OPEN, s.csrf)
    assert sessions.get("forged") is None and sessions.get(None) is None
    assert s.id not in repr(store.session_nodes) and s.key in store.session_nodes  # the store knows a hash
    now[0] = 1_059
    assert sessions.get(s.id) is not None  # a request keeps it alive
    now[0] = 1_120
    assert sessions.get(s.id) is None
    sessions.start(OPEN)  # a login removes the idle ones
    assert s.key not in store.session_nodes
    assert not s.csrf_ok(None) and not s.csrf_ok("") and s.csrf_ok(s.csrf)


def test_an_admin_undoes_a_run_from_the_nights_page_and_a_writer_cannot(console: Console) -> None:
    from taskzilla_sleep.night.pipeline import NightRequest, run_night

    night = run_night(console.worker.services, NightRequest(now=NOW + timedelta(hours=18), trigger="manual"))
    assert night.ok and console.graph.get_change(night.run.id) is not None
    writer = console.client()
    wcsrf = login(writer, WRITER)
    assert writer.post(f"/ui/runs/{night.run.id}/undo", data={"csrf": wcsrf, "reason": "x"}).status_code == 403
    c = console.client()
    csrf = login(c, ADMIN)
    page = c.get("/ui/nights").text
    action = re.search(r'action="(/ui/runs/[^"]+/undo)"', page)
    assert action is not None and night.run.id in action.group(1)
    assert c.post(action.group(1), data={"csrf": csrf, "reason": ""}).status_code == 422  # a reason is required
    r = c.post(action.group(1), data={"csrf": csrf, "reason": "it learned a status line"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/nights"
    after = c.get("/ui/nights").text
    assert f"undid {night.run.id}" in after and "undone by ops-admin" in after
    assert console.graph.get_change(night.run.id).undone_by == "ops-admin"  # type: ignore[union-attr]


def test_every_object_has_a_page_at_a_stable_url(console: Console) -> None:
    c = console.client()
    login(c, READER)
    page = c.get(f"/ui/contradictions/{console.cid}")  # the chat alert's "Open in console"
    assert page.status_code == 200 and f'id="c-{console.cid}"' in page.text
    assert "One reviewer is enough for a deploy" in page.text and "the rule changed" in page.text
    by_id = c.get("/ui/patterns/p-old")  # no ?team=: the belief's own team
    assert by_id.status_code == 200 and "One reviewer is enough for a deploy" in by_id.text
    ep = next(e for e in console.graph.episodes_by_status("platform", ["raw"]) if e.author == "omar")
    one = c.get(f"/ui/episodes/{ep.id}")
    assert one.status_code == 200 and "one approval and ship it" in one.text and "#deploys" in one.text
    person = c.get("/ui/entities/person/omar?team=platform")
    assert person.status_code == 200 and "one approval and ship it" in person.text
    assert "two reviewers for every deploy" not in person.text  # sara's, not omar's
    backed = person.text.split('<table class="backed">')[1].split("</table>")[0]
    assert "One reviewer is enough for a deploy" in backed and "two reviewers" not in backed  # his message backs it
    for path, code in [
        ("/ui/contradictions/con-nope", 404),
        ("/ui/patterns/p-nope", 404),
        ("/ui/episodes/ep-nope", 404),
        ("/ui/entities/planet/mars?team=platform", 422),
    ]:
        res = c.get(path)
        assert res.status_code == code and "<main>" in res.text, (path, res.status_code)


def test_another_teams_token_gets_no_object_of_platform_by_its_url(console: Console) -> None:
    ep = console.graph.episodes_by_status("platform", ["raw"])[0]
    c = console.client()
    login(c, OTHER)  # a writer of team ops
    for path, code in [
        (f"/ui/contradictions/{console.cid}", 404),  # as on /v1: another team's id does not exist
        ("/ui/patterns/p-old", 404),
        (f"/ui/episodes/{ep.id}", 404),
        ("/ui/messages?team=platform", 403),
        ("/ui/recall?team=platform&q=deploy", 403),
        ("/ui/entities/person/sara?team=platform", 403),
    ]:
        res = c.get(path)
        assert res.status_code == code, (path, res.status_code)
        assert ep.text not in res.text and "One reviewer is enough" not in res.text
    # And the pages of its own team list nothing of platform's.
    assert "deploy" not in re.sub(r"<[^>]+>", "", c.get("/ui/messages?team=ops").text).casefold()


def test_the_message_browser_searches_and_filters_archived_included(console: Console) -> None:
    c = console.client()
    login(c, READER)

    def rows(query: str) -> list[str]:
        res = c.get("/ui/messages" + query)
        assert res.status_code == 200, res.text[:500]
        return re.findall(r'<tr data-id="([^"]+)"', res.text)

    every = console.graph.episodes_by_status("platform", ["raw", "absorbed"])
    assert len(rows("")) == len(every) == 6
    saras = rows("?author=sara")
    assert len(saras) == 2 and set(saras) == {e.id for e in every if e.author == "sara"}
    assert saras[0] == max((e for e in every if e.author == "sara"), key=lambda e: e.ts).id  # newest first
    assert rows("?q=APPROVAL") == [
        e.id for e in sorted(every, key=lambda e: e.ts, reverse=True) if "approval" in e.text
    ]
    assert rows("?channel=nowhere") == [] and rows("?status=archived") == []
    # A message decay retired is still listed (archived), its text no longer in the graph.
    gone = every[0]
    change = ChangeRecord(id="run-decay", kind="run", at=NOW, recorded_at=NOW, seq=1, by="night", teams=("platform",))
    recorded(console.graph, change, "platform").retire_episodes(
        [Retirement(gone.id, EpisodeStatus.RETIRED, NOW, "decay")]
    )
    assert console.graph.get_episodes([gone.id])[0].text == ""  # the graph dropped it; the archive keeps it
    assert rows("?status=archived") == [gone.id] and gone.id in rows("")
    assert gone.id not in rows("?status=live")
    assert rows("?status=archived&q=" + gone.text.split()[-1]) == [gone.id]  # searched in the archive's text
    page = c.get(f"/ui/episodes/{gone.id}").text
    assert "from the archive" in page and gone.text in html_unescape(page)
    bad = c.get("/ui/messages?status=bogus")
    assert bad.status_code == 422 and "status must be one of live, archived" in bad.text


def test_the_recall_box_makes_the_apis_call_and_says_why(console: Console) -> None:
    c = console.client()
    login(c, READER)
    api = c.get(
        "/v1/recall",
        params={"q": "deploy reviewers", "team": "platform", "k": 3, "format": "prompt"},
        headers={"Authorization": f"Bearer {READER}"},
    ).json()
    page = c.get("/ui/recall", params={"q": "deploy reviewers", "team": "platform", "k": 3}).text
    shown = re.findall(r'class="card recall-item kind-(\w+)" data-rank="(\d+)" data-id="([^"]+)"', page)
    assert [(kind, rank, i) for kind, rank, i in shown] == [
        (it["kind"], str(n), it["id"]) for n, it in enumerate(api["items"], 1)
    ]
    assert len(shown) == 3 and "to the question" in page
    whys = re.findall(r'<ul class="why">(.*?)</ul>', page, re.S)
    assert len(whys) == 3 and all(re.search(r"similarity \d\.\d\d to the question", w) for w in whys)
    block = re.search(r'<pre class="prompt" id="recall-prompt">(.*?)</pre>', page, re.S)
    assert block is not None and html_unescape(block.group(1)) == api["prompt"]
    too_many = c.get("/ui/recall", params={"q": "x", "k": 99})
    assert too_many.status_code == 422 and "k must be a whole number from 1 to 50" in too_many.text


def test_times_are_shown_in_the_schedule_zone_with_its_marker(console: Console) -> None:
    c = console.client()
    login(c, ADMIN)
    status = c.get("/ui/status").text
    assert "times in Europe/Amsterdam" in status
    st = console.worker.status(None)
    nxt = datetime.fromisoformat(st["next_night"]).astimezone(ZoneInfo("Europe/Amsterdam"))
    assert f"{nxt:%Y-%m-%d %H:%M} CET</time>" in status  # not the UTC figure, and marked
    queue = c.get("/ui/contradictions").text
    assert f"{NOW:%Y-%m-%d %H:%M} CET" in queue  # opened at NOW (09:00+01:00), not 08:00 UTC


def test_why_an_item_is_recalled_reads_its_own_fields() -> None:
    from taskzilla_sleep.interfaces.console.explore import why
    from taskzilla_sleep.memory.recall import RecallItem
    from taskzilla_sleep.memory.recall.item import ContradictionRef

    fact = RecallItem(kind="fact", id="f1", team="t", text="x", similarity=0.4, provenance="pinned", pinned_by="ann")
    assert why(fact)[:2] == ["a pinned fact: facts come first (pinned by ann)", "similarity 0.40 to the question"]
    side = RecallItem(
        kind="pattern",
        id="p1",
        team="t",
        text="y",
        similarity=None,
        confidence=0.5,
        evidence_count=1,
        provenance="distilled",
        contradiction=ContradictionRef(id="con-9", kind=ContradictionKind.DISAGREEMENT),
    )
    assert why(side) == [
        "no match of the question itself: shown beside a hit (the other side of its contradiction, or the belief "
        "it replaced)",
        "a belief of confidence 0.50",
        "1 supporting message",
        "contested: contradiction con-9 is open",
    ]
    old = RecallItem(
        kind="episode", id="e1", team="t", text="z", similarity=0.71, provenance="ai-draft", draft=True, duplicates=3
    )
    assert why(old) == [
        "similarity 0.71 to the question",
        "the bot's own draft: asked for with include=drafts",
        "said 3 times (collapsed into one)",
    ]


def test_every_page_sends_a_logged_out_browser_to_the_login_form_and_back(console: Console) -> None:
    """Every GET page of /ui (read from the console's router: a page added later is covered too)."""
    c = console.client()
    open_pages = {"/ui", "/ui/", "/ui/login", "/ui/static/console.css"}
    router = console_router(console.worker.memory, Tokens({}), lambda teams: {})
    paths = sorted(
        r.path for r in router.routes if isinstance(r, APIRoute) and "GET" in r.methods and r.path not in open_pages
    )
    assert len(paths) >= 14 and "/ui/recall" in paths and "/ui/contradictions/{cid}" in paths
    for path in paths:
        url = re.sub(r"\{[^}]+\}", "x-1", path)
        r = c.get(url, params={"team": "platform"})
        assert r.status_code == 303, (path, r.status_code)
        assert r.headers["location"] == f"/ui/login?next={quote(url + '?team=platform', safe='')}", path


def test_the_signed_in_check_of_a_page_is_written_once() -> None:
    """The pages ask ``Console.show`` for the session (no session: the login form; a service error: the
    error page): no route module reads the session or sends to the login form itself."""
    root = Path(__file__).resolve().parents[2] / "taskzilla_sleep" / "interfaces" / "console"
    for name in ("routes.py", "explore.py"):
        calls = [
            n.func.attr
            for n in ast.walk(ast.parse((root / name).read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        ]
        assert "session" not in calls and calls.count("show") >= 5, name
