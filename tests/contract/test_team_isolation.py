"""Team isolation over a real socket (the worker's API served by uvicorn on the embedded stores): an
id clash shows a team nothing of another team's message, over /v1, the Python client and MCP at /mcp;
a one-team admin's status, console and export show its teams' figures only."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.client import ApiError, Client
from taskzilla_sleep.core.models import Run, StepResult
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.memory.admin.export_file import parse_export
from taskzilla_sleep.night.pipeline import store_sizes
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import Access, token_hash
from tests.contract.test_mcp import _text
from tests.unit.test_console import csrf_of

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
A_WRITE, B_WRITE, A_ADMIN, ADMIN = "tz-iso-a-write", "tz-iso-b-write", "tz-iso-a-admin", "tz-iso-admin"
DESIGN_READ = "tz-iso-design-read"  # design (configured for it, no data yet) and ops
GRANTS = {
    token_hash(A_WRITE): {"name": "platform-bot", "teams": ["platform"], "role": "write"},
    token_hash(B_WRITE): {"name": "ops-bot", "teams": ["ops"], "role": "write"},
    token_hash(A_ADMIN): {"name": "platform-admin", "teams": ["platform"], "role": "admin"},
    token_hash(ADMIN): {"name": "ops-admin", "teams": ["*"], "role": "admin"},
    token_hash(DESIGN_READ): {"name": "design-bot", "teams": ["design", "ops"], "role": "read"},
}
SECRET = {
    "id": "msg-1001",
    "team": "platform",
    "channel": "payroll",
    "author": "lena",
    "text": "salaries move to the 25th from january",
    "ts": "2026-11-27T10:17:00+01:00",
    "provenance": "human",
}
# Nothing of it may reach team ops: its team, channel, author, words of its text, its time.
LEAKS = ("platform", "payroll", "lena", "salar", "25th", "january", "10:17", "09:17", "2026-11-27")
CLASH = (
    "id 'msg-1001' is already used by another message (ids are unique per store: prefix a connector's ids, "
    "e.g. tg-<chat>-<message>, or leave id out)"
)


@dataclass
class Served:
    url: str
    services: Services
    worker: Worker


def ops_ep(i: int, **over: Any) -> dict[str, Any]:
    return {
        "team": "ops",
        "channel": "infra",
        "author": f"olaf{i}",
        "text": f"the staging cluster is rebuilt on sundays {i}",
        "ts": "2026-11-27T16:00:00+01:00",
        "provenance": "human",
    } | over


def run(rid: str, team: str | None, hours: int, episodes: int) -> Run:
    at = NOW - timedelta(hours=hours)
    step = StepResult(step="distill", status="ok", started_at=at, finished_at=at, counts={"groups": 7})
    return Run(
        id=rid,
        trigger="schedule",
        started_at=at,
        finished_at=at,
        now=at,
        slot="2026-11-27" if team else None,
        team=team,
        steps=[step],
        sizes_after={"episodes_total": episodes},
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("isolation")
    overrides = {"api.tokens": GRANTS, "api.host": "127.0.0.1"}
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(data)}, overrides=overrides)) as services:
        worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
        url = worker.start_api()
        assert url is not None
        try:
            with httpx.Client(base_url=url, timeout=60) as h:
                mine = h.post("/v1/episodes", json={"episodes": [SECRET]}, headers=bearer(A_WRITE))
                assert mine.status_code == 200 and mine.json()["new"] == 1, mine.text
                theirs = h.post("/v1/episodes", json={"episodes": [ops_ep(1), ops_ep(2)]}, headers=bearer(B_WRITE))
                assert theirs.json()["new"] == 2, theirs.text
            for r in (
                run("run-platform", "platform", 5, 11),
                run("run-ops", "ops", 4, 4321),
                run("run-every-team", None, 3, 9999),  # a run-once over every team: every team's sizes
            ):
                services.graph.save_run(r)
            yield Served(url, services, worker)
        finally:
            worker._server.should_exit = True
            if worker._api_thread is not None:
                worker._api_thread.join(timeout=15)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def no_leak(text: str) -> None:
    for secret in LEAKS:
        assert secret not in text, (secret, text)


def test_an_id_clash_over_v1_and_the_client_shows_nothing_of_another_teams_message(served: Served) -> None:
    before = served.services.graph.counts()
    stored_hash = served.services.graph.stored_episodes(["msg-1001"])["msg-1001"].content_hash
    assert stored_hash
    for same_text in (False, True):  # even a guess of the very text learns nothing
        clash = ops_ep(3, id="msg-1001", **({"text": SECRET["text"]} if same_text else {}))
        r = httpx.post(served.url + "/v1/episodes", json={"episodes": [ops_ep(4), clash]}, headers=bearer(B_WRITE))
        assert r.status_code == 422
        assert r.json()["error"]["details"] == [{"index": 1, "field": "id", "reason": CLASH}]
        no_leak(r.text)
        assert stored_hash not in r.text and stored_hash[:8] not in r.text
        with pytest.raises(ApiError) as info:
            Client(served.url, token=B_WRITE, team="ops").ingest([ops_ep(4), clash])
        assert info.value.status == 422 and [d.reason for d in info.value.details] == [CLASH]
        no_leak(str(info.value) + repr(info.value.details))
    assert served.services.graph.counts() == before  # nothing written, not even the valid item
    # The message's own team is shown what differs: its own data.
    own = dict(SECRET, text="salaries move to the 26th")
    r = httpx.post(served.url + "/v1/episodes", json={"episodes": [own]}, headers=bearer(A_WRITE))
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["reason"].startswith(
        "id 'msg-1001' is already stored with other content: text 'salaries move to the 26th' (stored: 'salaries"
    )


def test_an_id_clash_over_mcp_remember_shows_nothing_of_another_teams_message(served: Served) -> None:
    async def remember() -> str:
        http = httpx2.AsyncClient(headers=bearer(B_WRITE), timeout=60)
        async with http, McpClient(streamable_http_client(served.url + "/mcp", http_client=http)) as mcp:
            result = await mcp.call_tool("remember", {"episodes": [ops_ep(5, id="msg-1001")]})
            assert result.is_error
            return _text(result)

    text = anyio.run(remember)
    assert "invalid: " in text and CLASH in text, text
    no_leak(text)


def login(browser: httpx.Client, token: str) -> None:
    form = browser.get("/ui/login")
    done = browser.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text), "next": "/ui/status"})
    assert done.status_code == 303, done.text


def test_a_one_team_admin_sees_its_teams_figures_only(served: Served) -> None:
    g, v = served.services.graph, served.services.vectors
    mine = httpx.get(served.url + "/v1/status", headers=bearer(A_ADMIN)).json()
    assert mine["sizes"] == store_sizes(g, v, "platform") and mine["sizes"]["episodes_total"] == 1
    assert [r["id"] for r in mine["last_runs"]] == ["run-platform"]
    assert mine["teams"] == ["platform"] and mine["open_contradictions"] == 0
    assert [[j["team"] for j in n["jobs"]] for n in mine["last_nights"]] == [["platform"]]
    everything = httpx.get(served.url + "/v1/status", headers=bearer(ADMIN)).json()
    assert everything["teams"] is None and everything["sizes"]["episodes_total"] == 3
    assert [r["id"] for r in everything["last_runs"]] == ["run-every-team", "run-ops", "run-platform"]

    # The console: its status page and the nights report, as the same token.
    with httpx.Client(base_url=served.url, timeout=60) as browser:
        login(browser, A_ADMIN)
        page = browser.get("/ui/status")
        assert page.status_code == 200 and "The figures of platform only" in page.text
        assert "run-platform" in page.text and "run-ops" not in page.text and "run-every-team" not in page.text
        nights = browser.get("/ui/nights").text
        assert "→ 11<" in nights and not {"4,321", "4,332", "9,999"} & set(re.findall(r"\d,\d{3}", nights))
        # A run's page: its team's run only; a run over every team is none of its own (as the report).
        assert browser.get("/ui/runs/run-platform").status_code == 200
        for other in ("run-ops", "run-every-team", "run-nope"):
            res = browser.get(f"/ui/runs/{other}")
            assert res.status_code == 404 and "no run" in res.text and "4,321" not in res.text
    with httpx.Client(base_url=served.url, timeout=60) as browser:
        login(browser, ADMIN)
        assert "run-ops" in browser.get("/ui/status").text
        assert all(browser.get(f"/ui/runs/{r}").status_code == 200 for r in ("run-ops", "run-every-team"))
        assert {"4,332", "9,999"} <= set(re.findall(r"\d,\d{3}", browser.get("/ui/nights").text))
    report = served.worker.memory.nights(Access("platform-admin", frozenset({"platform"}), "admin"), 14)
    assert [n.sizes_after.get("episodes_total") for n in report.nights] == [11]  # its job's, not ops' added
    every = served.worker.memory.nights(Access("ops-admin", None, "admin"), 14)
    assert [n.sizes_after.get("episodes_total") for n in every.nights] == [11 + 4321, 9999]

    # Its export: its team's jobs only, and whole (the trailer checks out).
    export = httpx.get(served.url + "/v1/export", params={"team": "platform"}, headers=bearer(A_ADMIN), timeout=60)
    assert export.status_code == 200
    lines = export.text.split("\n")
    runs = [json.loads(x)["id"] for x in lines if x and json.loads(x)["type"] == "run"]
    assert runs == ["run-platform"]  # not the run over every team: it holds every team's figures
    parsed = parse_export(lines, "export.jsonl")
    assert parsed.team == "platform" and [e.id for e in parsed.items["episode"]] == ["msg-1001"]
    assert "4321" not in export.text and "9999" not in export.text
    other = httpx.get(served.url + "/v1/export", params={"team": "ops"}, headers=bearer(A_ADMIN), timeout=60)
    assert other.status_code == 403


def test_a_team_with_no_data_at_all_is_unknown_team_not_nothing_known(served: Served) -> None:
    def get(path: str, token: str, **params: str) -> httpx.Response:
        return httpx.get(served.url + path, params=params, headers=bearer(token), timeout=60)

    # An every-team admin misspells a team: 404 unknown_team, the nearest team it may see named.
    for path in ("/v1/recall", "/v1/patterns", "/v1/contradictions", "/v1/facts"):
        r = get(path, ADMIN, team="platfrom", q="when are salaries paid")
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "unknown_team", r.text
        assert r.json()["error"]["message"] == (
            "team 'platfrom' has no data at all (nothing was ever ingested for it): check the name "
            "— did you mean 'platform'?"
        )
    # A real team with nothing that matches is an empty answer, as before.
    ok = get("/v1/contradictions", ADMIN, team="ops")
    assert ok.status_code == 200 and ok.json() == []
    # A team configured for the token but empty yet: nothing known, not an error.
    empty = get("/v1/recall", DESIGN_READ, team="design", q="staging cluster")
    assert empty.status_code == 200 and empty.json()["items"] == []
    # Isolation: a token of some teams never learns another team's name (platform is not its own).
    for token, team in ((DESIGN_READ, "platfrom"), (B_WRITE, "platfrom"), (DESIGN_READ, "opz")):
        r = get("/v1/recall", token, team=team, q="when are salaries paid")
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
        no_leak(r.text)

    async def over_mcp() -> str:
        http = httpx2.AsyncClient(headers=bearer(ADMIN), timeout=60)
        async with http, McpClient(streamable_http_client(served.url + "/mcp", http_client=http)) as mcp:
            result = await mcp.call_tool("recall", {"query": "salaries", "team": "platfrom"})
            assert result.is_error
            return _text(result)

    assert anyio.run(over_mcp).startswith("unknown_team: team 'platfrom' has no data at all")
