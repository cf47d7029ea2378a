"""A person resolves a contradiction by clicking in the memory console: the worker's API served by
uvicorn on the real embedded stores (FalkorDB + Chroma) after the sample week's night, and headless
Chromium (Debian's package) driven by Playwright. The screenshot is kept in .tmp/artifacts/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash
from tests.e2e.test_cli import ROOT
from tests.e2e.test_report import chromium

NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
WRITER = "tz-console-writer-token"
ADMIN = "tz-console-admin-token"
ARTIFACTS = Path(os.environ.get("TASKZILLA_ARTIFACTS", str(ROOT / ".tmp" / "artifacts")))


@dataclass
class Served:
    url: str
    services: Services


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("console")
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(data)},
        overrides={
            "api.default_team": "platform",
            "api.host": "127.0.0.1",
            "api.tokens": {
                token_hash(WRITER): {"name": "dana", "teams": ["platform"], "role": "write"},
                token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"},
            },
        },
    )
    with build(settings) as services:
        services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
        assert run_night(services, NightRequest(now=NOW)).ok
        worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
        url = worker.start_api()
        assert url is not None and url.startswith("http://127.0.0.1:")
        try:
            yield Served(url, services)
        finally:
            worker._shutdown()  # stops uvicorn and joins its thread


def launch(pw: Any) -> Any:
    return pw.chromium.launch(
        executable_path=chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    )


def test_a_person_resolves_a_contradiction_by_clicking(served: Served) -> None:
    from playwright.sync_api import expect, sync_playwright

    (con,) = served.services.graph.contradictions("platform", "open")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "console-resolve.png"
    shot.unlink(missing_ok=True)
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.set_default_timeout(30_000)

            page.goto(served.url + "/ui/contradictions")
            assert "/ui/login" in page.url  # logged out: the login form first
            page.get_by_label("token").fill("not-the-token")
            page.get_by_role("button", name="log in").click()
            expect(page.get_by_role("alert")).to_contain_text("matches no configured token")
            page.get_by_label("token").fill(WRITER)
            page.get_by_role("button", name="log in").click()
            page.wait_for_url("**/ui/contradictions")

            card = page.locator(f"#c-{con.id}")
            expect(card).to_be_visible()
            expect(card).to_contain_text("A change to confirm")
            expect(card).to_contain_text("people:")
            page.screenshot(path=str(ARTIFACTS / "console-queue.png"), full_page=True)
            card.get_by_label("note").fill("we moved on; the new way holds")
            card.get_by_role("button", name="keep new").click()

            page.wait_for_url("**/ui/contradictions?team=platform")
            expect(page.get_by_role("status")).to_contain_text(f"resolved {con.id}: kept new (by dana)")
            expect(page.locator(f"#c-{con.id}")).to_have_count(0)
            expect(page.locator("#queue-empty")).to_be_visible()
            page.screenshot(path=str(shot), full_page=True)

            page.get_by_role("button", name="log out").click()
            page.wait_for_url("**/ui/login")
            page.goto(served.url + "/ui/contradictions")
            assert "/ui/login" in page.url
        finally:
            browser.close()
    # The one failed request is the wrong token's answer (401); no script error, no missing file.
    assert problems == ["Failed to load resource: the server responded with a status of 401 (Unauthorized)"]
    done = served.services.graph.get_contradiction(con.id)
    assert (done.status.value, done.resolution, done.resolved_by) == ("resolved", "new", "dana")
    assert done.note == "we moved on; the new way holds"
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_admin_sees_the_nights_charts_the_outbox_and_status(served: Served) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(served.url + "/ui/nights")
            page.get_by_label("token").fill(ADMIN)
            page.get_by_role("button", name="log in").click()
            page.wait_for_url("**/ui/nights")  # back where the person was going
            expect(page.locator(".card.v-ok, .card.v-watch, .card.v-bad, .card.v-unknown")).to_have_count(6)
            assert page.locator(".chart svg").count() >= 7  # the report's own SVG charts
            page.screenshot(path=str(ARTIFACTS / "console-nights.png"), full_page=True)
            page.get_by_role("link", name="Alerts").click()
            expect(page.locator("h2")).to_contain_text("Alert outbox")
            page.get_by_role("link", name="Status").click()
            expect(page.locator("main")).to_contain_text("open contradictions")
            # A decision, then the audit trail shows who made it.
            page.get_by_role("link", name="Pinned facts").click()
            page.get_by_label("fact", exact=True).fill("The release train leaves on Thursdays")
            page.get_by_role("button", name="pin", exact=True).click()
            expect(page.get_by_role("status")).to_contain_text("pinned")
            page.get_by_role("link", name="Audit").click()
            expect(page.locator("h2")).to_contain_text("Audit trail")
            row = page.locator("table tr", has_text="ops-admin").filter(has_text="pin").first
            expect(row).to_contain_text("platform")
            page.get_by_label("action").fill("resolve")
            page.get_by_role("button", name="show").click()
            expect(page.locator("main")).not_to_contain_text("ops-admin (admin)")
            page.screenshot(path=str(ARTIFACTS / "console-audit.png"), full_page=True)
            page.get_by_role("link", name="Patterns").click()
            page.get_by_label("search").fill("standup")
            page.get_by_role("button", name="filter").click()
            page.locator("table a").first.click()
            expect(page.locator("main")).to_contain_text("Evidence timeline")
        finally:
            browser.close()
