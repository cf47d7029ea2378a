"""The API's docs pages on a host without the internet: the worker's API served by uvicorn on the real
embedded stores, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) opened in headless Chromium (Debian's
package) driven by Playwright. Every operation of ``/openapi.json`` is on the page, and every request
the page made went to the worker: no CDN, no font service, no public validator."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from taskzilla_sleep.app import build
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash
from tests.e2e.test_console import NOW, launch

READER = "tz-docs-reader-token"


@dataclass
class Served:
    url: str
    schema: dict[str, Any]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(tmp_path_factory.mktemp("docs"))},
        overrides={
            "api.default_team": "platform",
            "api.host": "127.0.0.1",
            # Tokens configured: /v1 needs one, the schema and its pages do not.
            "api.tokens": {token_hash(READER): {"name": "reader", "teams": ["platform"], "role": "read"}},
        },
    )
    with build(settings) as services:
        worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
        url = worker.start_api()
        assert url is not None and url.startswith("http://127.0.0.1:")
        try:
            schema = httpx.get(url + "/openapi.json", timeout=30).raise_for_status().json()
            yield Served(url, schema)
        finally:
            worker._shutdown()  # stops uvicorn and joins its thread


def summaries(schema: dict[str, Any]) -> list[str]:
    """The title each UI shows for every operation (FastAPI's summary, from the function's name)."""
    return [op["summary"] for item in schema["paths"].values() for op in item.values() if isinstance(op, dict)]


def local(url: str, base: str) -> bool:
    """On the worker itself, or data the page made up (data:, blob:), never another host."""
    if urlsplit(url).scheme in ("data", "blob"):
        return True
    here, there = urlsplit(base), urlsplit(url)
    return (there.scheme, there.hostname, there.port) == (here.scheme, here.hostname, here.port)


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_docs_page_needs_no_token_and_names_only_the_workers_own_files(served: Served, path: str) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as anon:
        assert anon.get("/v1/recall", params={"q": "x"}).status_code == 401  # the API itself needs one
        page = anon.get(path)
        assert page.status_code == 200, page.text[:300]
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        linked = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(r"url: ?'([^']+)'", page.text)
        assert any(u.endswith(".js") for u in linked) and any("favicon" in u for u in linked), linked
        for ref in linked:
            assert local(urljoin(served.url + path, ref), served.url), ref
            res = anon.get(urljoin(path, ref))
            assert res.status_code == 200, (ref, res.status_code)
            assert len(res.content) > 1000, ref
        # The script is the UI itself, not a stub: Swagger UI's bundle, ReDoc's standalone build.
        script = next(u for u in linked if u.endswith(".js"))
        assert anon.get(script).text.count("function") > 1000


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_docs_page_renders_every_operation_from_the_worker_alone(served: Served, path: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    names = summaries(served.schema)
    assert "Recall" in names and len(names) > 20
    requested: list[str] = []
    failed: list[str] = []
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("request", lambda r: requested.append(r.url))
            page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
            page.on("response", lambda r: failed.append(f"{r.url} {r.status}") if r.status >= 400 else None)
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.set_default_timeout(30_000)
            answer = page.goto(served.url + path)
            assert answer is not None and answer.status == 200
            # Swagger UI shows each operation's path and summary; ReDoc its summary (menu and section).
            expect(page.get_by_text("Recall", exact=True).first).to_be_visible()
            page.wait_for_load_state("networkidle")
            text = page.locator("body").inner_text()
        finally:
            browser.close()
    missing = [name for name in names if name not in text]
    assert not missing, missing
    assert "/v1/recall" in text or path == "/redoc"  # ReDoc shows a path only in an opened panel
    assert requested, "the page made no request"
    elsewhere = [u for u in requested if not local(u, served.url)]
    assert not elsewhere, (elsewhere, failed, problems)
    paths = {urlsplit(u).path for u in requested}
    assert {path, "/openapi.json"} <= paths and any(p.startswith("/docs-assets/") for p in paths), paths
    assert not failed, failed
    assert not problems, problems


def test_an_operation_tried_from_swagger_ui_sends_the_token_given_to_authorize(served: Served) -> None:
    from playwright.sync_api import expect, sync_playwright

    requested: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("request", lambda r: requested.append(r.url))
            page.set_default_timeout(30_000)
            page.goto(served.url + "/docs")
            page.get_by_role("button", name=re.compile("Authorize")).first.click()
            dialog = page.locator(".modal-ux")
            dialog.locator("input").first.fill(READER)
            dialog.locator("button.modal-btn.authorize").click()  # named "Apply credentials" for a reader
            dialog.locator("button.modal-btn.btn-done").click()
            op = page.locator("#operations-default-recall")
            op.locator(".opblock-summary").click()
            op.get_by_role("button", name="Try it out").click()
            op.locator('tr[data-param-name="q"] input').fill("standup")
            op.get_by_role("button", name="Execute").click()
            status = op.locator(".live-responses-table tr.response .response-col_status").first
            expect(status).to_have_text("200", timeout=30_000)
            body = op.locator(".live-responses-table tr.response .highlight-code").first.inner_text()
        finally:
            browser.close()
    assert '"team": "platform"' in body
    assert any(urlsplit(u).path == "/v1/recall" for u in requested)
    assert all(local(u, served.url) for u in requested), requested
