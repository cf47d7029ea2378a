"""Every object has a console page at a stable URL, and every link the product emits toward the
console answers: the worker's API served by uvicorn on the real embedded stores (FalkorDB + Chroma)
after the sample week's night (plus a backfilled earlier night and a second team), a real HTTP client
for the links, headless Chromium (Debian's package, driven by Playwright) for the pages a person
uses: recall, messages, an entity, times in the schedule's zone, the Nights charts' time axis.
Screenshots go to the test's tmp dir."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpx
import pytest

from taskzilla_sleep.alerts.message import format_resolution, format_withdrawal
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.core.settings import Secrets, load_settings
from taskzilla_sleep.interfaces.console.web import local
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash
from taskzilla_sleep.stores.records import ChangeRecord, Retirement
from tests.e2e.test_console import launch

NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
ZONE = "Europe/Amsterdam"
ADMIN = "tz-pages-admin-token"
WRITER = "tz-pages-platform-writer"
INFRA = "tz-pages-infra-reader"
INFRA_WORD = "zebracrossing"  # only in the infra team's messages
MAX_PAGES = 400  # the crawl's bound (the sample week gives ~150 console URLs)


@dataclass
class Served:
    url: str
    services: Services


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _infra_lines() -> list[str]:
    return [
        json.dumps(
            {
                "team": "infra",
                "channel": "ops",
                "author": "ines",
                "text": f"The {INFRA_WORD} runbook covers failover drill number {i}.",
                "ts": f"2026-11-2{i}T10:00:00+01:00",
                "provenance": "human",
            }
        )
        for i in range(3, 7)
    ]


@pytest.fixture(scope="module", params=["falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The worker on embedded FalkorDB, or on a real Neo4j server (both with embedded Chroma)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    graph: dict[str, object] = {}
    secrets = Secrets()
    if request.param == "neo4j":
        from tests.neo4j_service import neo4j_auth

        graph = {"graph.backend": "neo4j", "graph.neo4j_uri": request.getfixturevalue("neo4j_uri")}
        auth = neo4j_auth()
        if auth:
            graph["graph.neo4j_user"] = auth[0]
            secrets = Secrets.from_env({"TASKZILLA_NEO4J_PASSWORD": auth[1]})
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(tmp_path_factory.mktemp("pages"))},
        overrides=graph
        | {
            "api.default_team": "platform",
            "api.host": "127.0.0.1",
            "api.public_url": url,  # the chat alerts' "Open in console" links point here
            "schedule.timezone": ZONE,
            "alerts.channels": {"hook": {"kind": "webhook", "url_env": "HOOK_URL"}},
            "api.tokens": {
                token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"},
                token_hash(WRITER): {"name": "dana", "teams": ["platform"], "role": "write"},
                token_hash(INFRA): {"name": "ines", "teams": ["infra"], "role": "read"},
            },
        },
    )
    with build(settings, secrets) as services:
        services.graph.delete_all()  # a Neo4j server is shared by the session's tests
        services.ingestor(clock=lambda: NOW).ingest_lines([*sample_lines(), *_infra_lines()], "sample")
        assert run_night(services, NightRequest(now=NOW)).ok
        # A backfill of the night before, run after it: the ledger holds it after the later night.
        assert run_night(services, NightRequest(now=NOW - timedelta(days=1), trigger="manual")).ok
        # One message decay-style retired: the graph drops its text, the archive keeps it.
        gone = next(e for e in services.graph.episodes_by_status("platform", ["raw"]) if e.author != "import-bot")
        change = ChangeRecord(
            id="run-decay-1", kind="run", at=NOW, recorded_at=NOW, seq=1, by="night", teams=("platform",)
        )
        recorded(services.graph, change, "platform").retire_episodes(
            [Retirement(gone.id, EpisodeStatus.RETIRED, NOW, "decay")]
        )
        Outbox(services.graph).sync_contradictions(settings.alerts.channels, NOW, public_url=settings.api.public_url)
        worker = Worker(
            services, ScaledClock(NOW, 0.0), serve_api=True, api_port=port, env={"HOOK_URL": "http://127.0.0.1:9/hook"}
        )
        assert worker.start_api() == url
        try:
            yield Served(url, services)
        finally:
            worker._shutdown()
            services.graph.delete_all()


def login(client: httpx.Client, token: str) -> None:
    form = client.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert form.status_code == 200 and csrf is not None
    done = client.post("/ui/login", data={"token": token, "csrf": csrf.group(1), "next": "/ui/contradictions"})
    assert done.status_code == 303, done.text[:300]


def emitted_links(served: Served) -> list[str]:
    """Every console URL the product sends out: each chat alert's button, and the follow-ups
    (resolution, withdrawal) that carry the alert's link on."""
    outbox = Outbox(served.services.graph)
    alerts = outbox.list()
    assert alerts, "the night opened no contradiction: nothing was alerted"
    links: list[str] = []
    for a in alerts:
        link = a.message.console_url
        assert link is not None and link.startswith(served.url + "/ui/")
        links.append(link)
        record = next(r for r in served.services.graph.alerts() if r.key == a.key)
        c = served.services.graph.get_contradiction(record.contradiction_id or "")
        beliefs = served.services.graph.patterns_by_id([c.old_pattern_id, c.new_pattern_id])
        links.append(format_resolution(c, beliefs, console_url=link).console_url or "")
        links.append(format_withdrawal(record, "run-x", "ops", "test", NOW).console_url or "")
    return sorted(set(links))


def crawl(client: httpx.Client, start: list[str]) -> dict[str, int]:
    """Every /ui page reachable by GET links from ``start``: path -> status."""
    seen: dict[str, int] = {}
    todo = list(start)
    while todo and len(seen) < MAX_PAGES:
        path = todo.pop()
        if path in seen:
            continue
        res = client.get(path)
        seen[path] = res.status_code
        if res.status_code == 200 and res.headers["content-type"].startswith("text/html"):
            for href in re.findall(r'href="([^"#]+)"', res.text):
                target = urljoin(path, href.replace("&amp;", "&"))
                if urlsplit(target).path.startswith("/ui/") and target not in seen:
                    todo.append(target)
    return seen


def test_every_console_link_answers_200_logged_in_and_the_login_form_logged_out(served: Served) -> None:
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as anon:
        root = anon.get("/")
        assert root.status_code in (303, 307) and root.headers["location"] == "/ui"
        for docs in ("/docs", "/redoc"):  # served with their scripts by the worker (test_api_docs.py)
            assert anon.get(docs).status_code == 200
        assert anon.get("/openapi.json").status_code == 200
    links = emitted_links(served)
    paths = [urlsplit(link).path for link in links]
    assert all(p.startswith("/ui/contradictions/") for p in paths)
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as admin:
        login(admin, ADMIN)
        for link in links:  # the alert's own absolute URL, as a person clicks it
            res = admin.get(link)
            assert res.status_code == 200, (link, res.status_code, res.text[:300])
            cid = unquote(urlsplit(link).path.rsplit("/", 1)[1])
            assert f'id="c-{cid}"' in res.text
        seen = crawl(admin, ["/ui/contradictions", *paths, "/ui/messages?status=archived", "/ui/recall?q=standup"])
    kinds = {urlsplit(p).path.split("/")[2] for p in seen}
    assert {"contradictions", "patterns", "episodes", "runs", "entities", "messages", "recall", "status"} <= kinds
    broken = {p: code for p, code in seen.items() if code not in (200, 303)}
    assert not broken, broken
    assert sum(code == 200 for code in seen.values()) > 50
    # Logged out, each of them goes to the login form (and back there after it), never to a 404.
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as anon:
        pages = [p for p, code in seen.items() if code == 200 and not p.startswith("/ui/static/")]
        for path in [*paths, *pages]:
            res = anon.get(path)
            assert res.status_code == 303, (path, res.status_code)
            assert res.headers["location"].startswith("/ui/login?next="), path


def test_a_user_of_one_team_never_sees_another_teams_objects(served: Served) -> None:
    g = served.services.graph
    platform_episode = g.episodes_by_status("platform", [EpisodeStatus.RAW.value, EpisodeStatus.ABSORBED.value])[0]
    platform_pattern = g.patterns("platform")[0]
    (con, *_) = g.contradictions("platform")
    platform_run = g.runs(1)[0]
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as infra:
        login(infra, INFRA)
        mine = infra.get("/ui/messages")
        assert mine.status_code == 200 and INFRA_WORD in mine.text
        assert platform_episode.text not in mine.text and "standup" not in mine.text.casefold()
        assert infra.get("/ui/recall", params={"q": "standup", "team": "infra"}).status_code == 200
        for path, code in [
            (f"/ui/episodes/{platform_episode.id}", 404),
            (f"/ui/patterns/{platform_pattern.id}", 404),
            (f"/ui/contradictions/{con.id}", 404),
            (f"/ui/runs/{platform_run.id}", 403),  # a read token: runs are admin pages
            ("/ui/messages?team=platform", 403),
            ("/ui/recall?team=platform&q=standup", 403),
            (f"/ui/entities/person/{platform_episode.author}?team=platform", 403),
        ]:
            res = infra.get(path)
            assert res.status_code == code, (path, res.status_code)
            assert platform_episode.text not in res.text and platform_pattern.statement not in res.text


def _login_browser(page: Any, url: str, token: str, then: str) -> None:
    page.goto(url + then)
    assert "/ui/login" in page.url
    page.get_by_label("token").fill(token)
    page.get_by_role("button", name="log in").click()
    page.wait_for_url("**" + then.split("?")[0] + "*")


def test_the_recall_box_shows_exactly_what_the_bot_gets(served: Served, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    question = "when is the standup"
    with httpx.Client(base_url=served.url, timeout=60) as bot:
        api = bot.get(
            "/v1/recall",
            params={"q": question, "team": "platform", "format": "prompt"},
            headers={"Authorization": f"Bearer {WRITER}"},
        )
    assert api.status_code == 200
    want = [(i["kind"], i["id"]) for i in api.json()["items"]]
    assert len(want) >= 3
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.set_default_timeout(30_000)
            _login_browser(page, served.url, WRITER, "/ui/recall")
            page.get_by_label("question").fill(question)
            page.get_by_role("button", name="recall").click()
            page.wait_for_url("**/ui/recall?*")
            items = page.locator("#recall-items > li")
            expect(items).to_have_count(len(want))
            got = [
                (items.nth(i).get_attribute("class") or "", items.nth(i).get_attribute("data-id"))
                for i in range(len(want))
            ]
            assert [(cls.split("kind-")[1], i) for cls, i in got] == want  # same items, same order
            first = items.nth(0)
            expect(first).to_contain_text("#1")
            expect(first.locator("ul.why")).to_contain_text("to the question")  # why it is there
            expect(page.locator("#recall-prompt")).to_have_text(api.json()["prompt"])
            page.screenshot(path=str(tmp_path / "console-recall.png"), full_page=True)
            # A pattern of the list opens its page, found by the id alone.
            first.locator("p.belief a").click()
            expect(page.locator("main")).to_contain_text(api.json()["items"][0]["text"][:40])
        finally:
            browser.close()
    assert problems == []
    assert (tmp_path / "console-recall.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_messages_and_entity_pages_with_times_in_the_schedule_zone(served: Served, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    g = served.services.graph
    every = g.episodes_by_status("platform", [s.value for s in EpisodeStatus if s is not EpisodeStatus.QUARANTINED])
    archived = [e for e in every if e.status.value in ("retired", "pruned", "forgotten")]
    assert archived and not [e for e in archived if e.text]
    author = max({e.author for e in every}, key=lambda a: sum(e.author == a for e in every))
    theirs = [e for e in every if e.author == author]
    channel = theirs[-1].channel
    in_channel = [e for e in theirs if e.channel == channel]
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(30_000)
            _login_browser(page, served.url, ADMIN, "/ui/messages")
            expect(page.locator("#messages-total")).to_contain_text(f"{len(every)} messages")
            expect(page.locator("header")).to_contain_text(f"times in {ZONE}")
            page.get_by_label("author").select_option(author)
            page.get_by_label("channel").select_option(channel)
            page.get_by_role("button", name="filter").click()
            expect(page.locator("#messages-total")).to_contain_text(f"{len(in_channel)} message")
            rows = page.locator("table.messages tr[data-id]")
            expect(rows).to_have_count(min(len(in_channel), 50))
            newest = max(in_channel, key=lambda e: (e.ts, e.id))
            assert rows.nth(0).get_attribute("data-id") == newest.id  # newest first
            shown = local(newest.ts, ZONE)
            assert shown is not None and shown[1].endswith(("CET", "CEST"))
            expect(rows.nth(0)).to_contain_text(shown[1])  # the time in the zone, with its marker
            page.screenshot(path=str(tmp_path / "console-messages.png"), full_page=True)
            # Archived messages are listed too, a retired one with its text from the archive, and found by it.
            (retired,) = [e for e in archived if e.status is EpisodeStatus.RETIRED]
            kept = g.archived_texts([retired.id])[retired.id]
            page.goto(served.url + "/ui/messages?status=archived&q=" + kept.split()[-1])
            expect(page.locator("#messages-total")).to_contain_text("1 message")
            row = page.locator(f'table.messages tr[data-id="{retired.id}"]')
            expect(row).to_contain_text("from the archive")
            expect(row).to_contain_text(kept)
            # The author's entity page: their beliefs and the messages that name them.
            page.goto(served.url + "/ui/messages")
            page.locator("table.messages a", has_text=author).first.click()
            expect(page.locator("h2").first).to_contain_text(f"Person · {author}")
            expect(page.locator("table.messages tr[data-id]")).not_to_have_count(0)
            assert page.locator("table.messages tr[data-id]").count() >= min(len(theirs), 200)
            mine = {e.id for e in theirs}
            backs = [p for p in g.patterns("platform") if mine & set(p.evidence_ids)]
            assert backs  # the sample's busiest author backs some belief
            expect(page.locator("table.backed a")).to_have_count(len(backs))
            page.screenshot(path=str(tmp_path / "console-entity.png"), full_page=True)
            # One message's page, from the entity page.
            page.locator("table.messages tr[data-id] a").first.click()
            expect(page.locator("h2").first).to_contain_text("Message")
            # The status page: clock and next night in the zone, marked.
            page.goto(served.url + "/ui/status")
            kpis = page.locator(".kpi", has_text="next night")
            text = kpis.inner_text()
            assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d (CET|CEST)", text), text
            assert "+00:00" not in text and "UTC" not in text
        finally:
            browser.close()


def test_the_nights_charts_run_left_to_right_in_time(served: Served, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(30_000)
            _login_browser(page, served.url, ADMIN, "/ui/nights")
            chart = page.locator(".chart svg").first
            dates = chart.evaluate(
                """svg => [...svg.querySelectorAll('text')]
                    .filter(t => /^\\d\\d-\\d\\d$/.test(t.textContent))
                    .map(t => [t.getBoundingClientRect().x, t.textContent])"""
            )
            page.screenshot(path=str(tmp_path / "console-nights.png"), full_page=True)
        finally:
            browser.close()
    assert len(dates) >= 2, dates
    left_to_right = [d for _, d in sorted(dates)]
    assert left_to_right == sorted(left_to_right) and left_to_right[0] < left_to_right[-1], dates


def test_an_alert_link_of_an_unknown_contradiction_is_the_console_404_page(served: Served) -> None:
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=60) as admin:
        login(admin, ADMIN)
        res = admin.get("/ui/contradictions/con-does-not-exist")
    assert res.status_code == 404 and "no contradiction" in res.text and "<main>" in res.text
