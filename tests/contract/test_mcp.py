"""The MCP server as an MCP host runs it: `taskzilla-sleep mcp` in a child process on embedded stores,
driven by the SDK's own client over stdio and over streamable HTTP on a real socket. One scenario runs
on both transports: tools and their schemas, a read token and a write token of one team (the reader
cannot write; neither sees another team), remember -> recall (cited, no drafts unless asked), resolve a
contradiction a night flagged, forget an author. Every process a test starts, it stops."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from taskzilla_sleep.app import build
from taskzilla_sleep.core.models import EpisodeIn, episode_id_for
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.mcp_server import TOOL_NAMES
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import token_hash

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
READER, WRITER, OTHER = "tz-mcp-read-platform", "tz-mcp-write-platform", "tz-mcp-write-ops"
GRANTS = {
    token_hash(READER): {"name": "reader-bot", "teams": ["platform"], "role": "read"},
    token_hash(WRITER): {"name": "support-bot", "teams": ["platform"], "role": "write"},
    token_hash(OTHER): {"name": "ops-bot", "teams": ["ops"], "role": "write"},
}
START_TIMEOUT_S = 90.0  # a cold start on a busy 2-core machine: imports, FalkorDB child, MiniLM
DRAFT = "draft reply: the staging cluster rebuild moves to friday evenings"
OPS = "the staging cluster of ops is rebuilt every sunday"

Connect = Callable[[str], AbstractAsyncContextManager[Client]]


def _ep(text: str, author: str, team: str = "platform", provenance: str = "human") -> EpisodeIn:
    return EpisodeIn.model_validate(
        {"team": team, "channel": "infra", "author": author, "text": text, "ts": "2026-11-27T16:00:00+01:00"}
        | {"provenance": provenance}
    )


@pytest.fixture
def deployment(tmp_path: Path) -> tuple[Path, Path]:
    """A data dir after one night over the sample week (one open contradiction), another team's message
    and one of the bot's own drafts; a config with three scoped tokens. The server opens it afterwards."""
    data = tmp_path / "data"
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(data)})) as s:
        s.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
        assert run_night(s, NightRequest(now=NOW)).ok
        assert len(s.graph.contradictions("platform", "open")) == 1
        s.ingestor(clock=lambda: NOW).ingest_items(
            [_ep(OPS, "olaf", team="ops"), _ep(DRAFT, "bot", provenance="ai-draft")]
        )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"api": {"default_team": "platform", "tokens": GRANTS}}))
    return config, data


def _env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    return env | {"PYTHONPATH": str(ROOT), "TASKZILLA_DATA_DIR": str(data), "TASKZILLA_LOG_LEVEL": "info"} | extra


def _command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "taskzilla_sleep", "--config", str(config), "mcp", *args]


def _text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return result.structured_content


async def _refused(client: Client, tool: str, code: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error and result.structured_content is None, result
    text = _text(result)
    assert text.startswith(f"{code}: ") and "Traceback" not in text, text  # the API's code first
    return text


async def scenario(connect: Connect) -> None:
    """What a bot can do with each token, the same over either transport."""
    async with connect(WRITER) as w:
        tools = {t.name: t for t in (await w.list_tools()).tools}
        assert set(tools) == set(TOOL_NAMES)
        for t in tools.values():
            assert t.description and t.output_schema is not None and t.input_schema["type"] == "object", t.name
            # The docstring as a model reads it: no source indentation on its continuation lines.
            assert t.description == t.description.strip() and "\n " not in t.description, t.description
        recall_in = tools["recall"].input_schema
        assert recall_in["required"] == ["query"] and recall_in["properties"]["format"]["enum"] == ["json", "prompt"]
        assert recall_in["properties"]["k"]["maximum"] == 50 and "description" in recall_in["properties"]["team"]
        episode = tools["remember"].input_schema["$defs"]["EpisodeIn"]
        assert {"team", "channel", "author", "text", "ts", "provenance"} <= set(episode["required"])
        assert tools["resolve_contradiction"].input_schema["properties"]["keep"]["enum"] == ["new", "old", "both"]
        assert tools["forget"].input_schema["required"] == ["reason"]
        assert tools["recall"].annotations is not None and tools["recall"].annotations.read_only_hint

        (open_one,) = (await _call(w, "list_contradictions"))["contradictions"]
        cid = open_one["contradiction"]["id"]

        # A bad batch is refused whole, with the item and field named: nothing is written.
        bad = [_ep("the staging cluster is rebuilt every monday at 7", "quinn").model_dump(mode="json")]
        bad.append(bad[0] | {"ts": "2026-11-27T10:00:00"})
        msg = await _refused(w, "remember", "invalid", episodes=bad)
        assert "episode 1, field 'ts'" in msg and "nothing was written" in msg
        assert (await _call(w, "remember", episodes=bad[:1])) == {
            "new": 1,
            "present": 0,
            "skipped": 0,
            "skipped_by_connector": {},
            "edited": 0,
            "edits_ignored": 0,
        }
        # An edit and a reply through MCP: the same fields as everywhere episodes come in.
        assert {"thread_id", "reply_to", "edited_at"} <= set(episode["properties"])
        first = EpisodeIn.model_validate(bad[0])
        same_id = episode_id_for(first.team, first.channel, first.author, first.ts, first.text)  # its derived id
        fixed = bad[0] | {"id": same_id, "text": "the staging cluster is rebuilt every monday at 7:30"}
        assert (await _call(w, "remember", episodes=[fixed | {"edited_at": "2026-11-27T17:00:00+01:00"}]))[
            "edited"
        ] == 1
        for late in ("2026-11-27T17:00:00+01:00", "2026-11-27T16:30:00+01:00"):  # as old, older: no-ops
            assert (await _call(w, "remember", episodes=[fixed | {"text": "x", "edited_at": late}]))["edited"] == 0
        bad_reply = _ep("yes, 7:30 sharp", "olaf").model_dump(mode="json") | {"reply_to": "not an id!"}
        assert "field 'reply_to'" in await _refused(w, "remember", "invalid", episodes=[bad_reply])
        found = await _call(w, "recall", query="when is the staging cluster rebuilt", k=10)
        assert found["team"] == "platform" and {i["team"] for i in found["items"]} == {"platform"}
        mine = [i for i in found["items"] if i["author"] == "quinn"]
        assert mine and mine[0]["channel"] == "infra" and mine[0]["time"] and mine[0]["provenance"] == "human"
        assert all(not i["draft"] and i["provenance"] != "ai-draft" for i in found["items"])
        assert all(i["text"] != OPS for i in found["items"])  # the other team's own rebuild
        drafts = await _call(w, "recall", query="staging cluster rebuild", k=10, include_drafts=True)
        assert DRAFT in [i["text"] for i in drafts["items"] if i["draft"] and i["provenance"] == "ai-draft"]
        prompt = await _call(w, "recall", query="when is the staging cluster rebuilt", format="prompt", budget=200)
        assert prompt["prompt"] and "quinn" in prompt["prompt"]
        await _refused(w, "recall", "forbidden", query="staging cluster", team="ops")
        await _refused(w, "remember", "forbidden", episodes=[_ep(OPS, "olaf", team="ops").model_dump(mode="json")])

        done = await _call(w, "resolve_contradiction", id=cid, keep="new", note="we moved to async standups")
        assert (done["status"], done["resolution"], done["resolved_by"]) == ("resolved", "new", "support-bot")
        assert (await _call(w, "list_contradictions"))["contradictions"] == []
        assert [
            c["contradiction"]["id"]
            for c in (await _call(w, "list_contradictions", status="resolved"))["contradictions"]
        ] == [cid]
        await _refused(w, "resolve_contradiction", "conflict", id=cid, keep="old")
        await _refused(w, "resolve_contradiction", "not_found", id="con_nope", keep="old")

        fact = await _call(w, "pin_fact", text="Lea is on call this week", entity="lea")
        assert fact["pinned"] and fact["pinned_by"] == "support-bot"

        await _refused(w, "forget", "invalid", author="quinn", episode_id="ep_x", reason="asked")
        gone = await _call(w, "forget", author="quinn", reason="left the team and asked")
        assert gone["by"] == "support-bot" and gone["episodes_forgotten"]
        after = await _call(w, "recall", query="when is the staging cluster rebuilt", k=20)
        assert all(i["author"] != "quinn" for i in after["items"])

    async with connect(READER) as r:
        seen = await _call(r, "recall", query="who is on call", k=5)
        assert seen["items"] and {i["team"] for i in seen["items"]} == {"platform"}
        tried = [_ep("the reader slipped this in", "rita").model_dump(mode="json")]
        await _refused(r, "remember", "forbidden", episodes=tried)
        await _refused(r, "resolve_contradiction", "forbidden", id=cid, keep="old")
        await _refused(r, "forget", "forbidden", episode_id="ep_x", reason="asked")
        await _refused(r, "pin_fact", "forbidden", text="readers pin nothing")
        await _refused(r, "recall", "forbidden", query="staging cluster", team="ops")
        await _refused(r, "list_contradictions", "forbidden", team="ops")
        left = await _call(r, "recall", query="the reader slipped this in", k=20)
        assert all(i["author"] != "rita" for i in left["items"])


def _no_token_in(log: Path) -> str:
    text = log.read_text(errors="replace")
    assert not any(t in text for t in (READER, WRITER, OTHER)), "a token reached the log"
    return text


def test_the_mcp_server_over_stdio(deployment: tuple[Path, Path], tmp_path: Path) -> None:
    config, data = deployment
    errlog = tmp_path / "stdio.log"

    @asynccontextmanager
    async def connect(token: str) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=sys.executable,
            args=_command(config)[1:],
            env=_env(data, TASKZILLA_MCP_TOKEN=token),
            cwd=str(tmp_path),
        )
        with errlog.open("a") as err, anyio.fail_after(START_TIMEOUT_S + 60):
            # The client closes the server's stdin at the end and waits for it to exit (then kills it).
            async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
                yield client

    anyio.run(scenario, connect)
    log = _no_token_in(errlog)
    assert '"who": "support-bot"' in log and '"action": "forget"' in log  # audited, by name

    # Tokens are configured: a stdio server without one, or with a wrong one, refuses to start.
    cases = (({}, "set TASKZILLA_MCP_TOKEN"), ({"TASKZILLA_MCP_TOKEN": "nope"}, "matches no configured"))
    started = [
        (
            why,
            subprocess.Popen(
                _command(config),
                env=_env(data, **extra),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            ),
        )
        for extra, why in cases
    ]
    for why, proc in started:
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 2 and why in err.decode() and out == b"", (out, err)


@pytest.fixture
def http_server(deployment: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    config, data = deployment
    out, err = tmp_path / "http.out", tmp_path / "http.log"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(
            _command(config, "--transport", "http", "--port", "0"),
            env=_env(data),
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "http://" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        line = out.read_text()
        assert "http://" in line, f"the server did not start: {err.read_text()[-2000:]}"
        url = line.split(", ")[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        yield url, err
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_the_mcp_server_over_streamable_http(http_server: tuple[str, Path]) -> None:
    url, errlog = http_server
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"accept": "application/json, text/event-stream"}
    for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {WRITER}"}):
        r = httpx.post(url, json=initialize, headers=headers | auth, timeout=30)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
        assert r.headers["www-authenticate"].startswith("Bearer")

    @asynccontextmanager
    async def connect(token: str) -> AsyncIterator[Client]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            yield client

    anyio.run(scenario, connect)
    _no_token_in(errlog)


def test_the_worker_serves_mcp_at_slash_mcp_beside_its_api(tmp_path: Path) -> None:
    """One process, one set of stores: the worker's API also answers MCP at /mcp, behind the same tokens;
    its lifespan runs the session manager and a stop does not hang on it."""
    overrides = {"api.tokens": GRANTS, "api.default_team": "platform"}
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides=overrides)) as services:
        worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
        url = worker.start_api()
        assert url is not None and worker._server.started
        try:
            assert httpx.post(url + "/mcp", json={}, timeout=30).status_code == 401
            assert httpx.get(url + "/healthz", timeout=30).json() == {"ok": True}

            async def use() -> None:
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {WRITER}"}, timeout=60)
                async with http, Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
                    assert set(t.name for t in (await client.list_tools()).tools) == set(TOOL_NAMES)
                    text = "the release train leaves every wednesday at noon"
                    stored = await _call(client, "remember", episodes=[_ep(text, "quinn").model_dump(mode="json")])
                    assert stored["new"] == 1
                    found = await _call(client, "recall", query="when does the release train leave")
                    assert [i["author"] for i in found["items"]] == ["quinn"]
                    await _refused(client, "recall", "forbidden", query="release train", team="ops")

            anyio.run(use)
            assert worker._wake.is_set()  # an ingest over MCP wakes the loop like one over /v1
        finally:
            worker._server.should_exit = True
            assert worker._api_thread is not None
            worker._api_thread.join(timeout=15)
        assert not worker._api_thread.is_alive()
