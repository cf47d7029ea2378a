"""The example bots (examples/) as a bot developer runs them: Python with the package's client,
TypeScript typed by types generated from /openapi.json, Go on the standard library. Each bot works
for its own team against one real worker process (scoped tokens configured by SHA-256, loopback,
a free port), seeded so that every team has an open contradiction.

The Node bot needs `make examples` (npm ci); node and go missing are "unavailable": skipped
locally, a failure under TASKZILLA_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from taskzilla_sleep.app import build
from taskzilla_sleep.client import Client
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.rules.access import token_hash
from tests.conftest import service_unavailable
from tests.e2e.test_cli import ROOT
from tests.e2e.test_worker import stop, worker

EXAMPLES = ROOT / "examples"
NODE_BOT = EXAMPLES / "node-bot"
INGESTED = datetime.fromisoformat("2026-11-27T18:00:00+01:00")
NIGHT = datetime.fromisoformat("2026-11-28T03:25:00+01:00")
ADMIN = "tz-admin-token-of-the-clients-test"
TEAMS = {"python": "team-py", "node": "team-node", "go": "team-go"}  # one team a bot
GUEST = "guest-visitor"  # the author every bot has forgotten


def tokens(team: str) -> tuple[str, str]:
    return f"tz-read-{team}-0f3a", f"tz-write-{team}-9c1e"


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# -- the generated TypeScript types ----------------------------------------------------------------
@pytest.fixture(scope="module")
def schema(served: Any) -> dict[str, Any]:
    """/openapi.json as the worker serves it, as `npm run generate` reads it."""
    got: dict[str, Any] = httpx.get(served.api + "/openapi.json", timeout=30).json()
    assert "/v1/episodes" in got["paths"]
    return got


def node_tools() -> Path:
    if shutil.which("node") is None:
        service_unavailable("node is not installed (the Node example bot)")
    bin_dir = NODE_BOT / "node_modules" / ".bin"
    if not (bin_dir / "tsc").exists() or not (bin_dir / "openapi-typescript").exists():
        service_unavailable("examples/node-bot/node_modules is missing: run `make examples` (npm ci)")
    return bin_dir


def typecheck(schema: dict[str, Any], where: Path, *flags: str) -> Any:
    """Generate src/api.d.ts from ``schema`` with openapi-typescript, then compile the bot with tsc
    (strict, the example's own tsconfig) into ``where/dist``; the example directory stays as it is."""
    bin_dir = node_tools()
    (where / "src").mkdir(parents=True)
    (where / "openapi.json").write_text(json.dumps(schema))
    (where / "node_modules").symlink_to(NODE_BOT / "node_modules")
    shutil.copy(NODE_BOT / "src" / "bot.ts", where / "src" / "bot.ts")
    shutil.copy(NODE_BOT / "package.json", where / "package.json")  # "type": "module"
    tsconfig = {
        "extends": str(NODE_BOT / "tsconfig.json"),
        "compilerOptions": {"outDir": "dist", "rootDir": "src"},
        "include": ["src"],
    }
    (where / "tsconfig.json").write_text(json.dumps(tsconfig))
    gen = run([str(bin_dir / "openapi-typescript"), "openapi.json", "-o", "src/api.d.ts"], where)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    return run([str(bin_dir / "tsc"), "-p", ".", *flags], where)


@pytest.fixture(scope="module")
def node_bot(schema: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("node-bot")
    built = typecheck(schema, where)
    assert built.returncode == 0, built.stdout + built.stderr
    return where / "dist" / "bot.js"


def test_the_node_bot_type_checks_against_types_generated_from_the_schema(
    node_bot: Path, schema: dict[str, Any], tmp_path: Path
) -> None:
    assert node_bot.exists()
    broken = copy.deepcopy(schema)  # a schema that lost the episodes' request body: the bot no longer compiles
    del broken["paths"]["/v1/episodes"]["post"]["requestBody"]
    refused = typecheck(broken, tmp_path, "--noEmit")
    print(refused.stdout)
    assert refused.returncode != 0 and "src/bot.ts" in refused.stdout, refused.stdout + refused.stderr


# -- the bots against a real worker ----------------------------------------------------------------
def seed_lines() -> list[str]:
    """The sample week once for every bot's team: each gets its beliefs and its open contradiction."""
    out = []
    for team in TEAMS.values():
        for line in sample_lines():
            if line.strip():
                ep = json.loads(line)
                out.append(json.dumps(ep | {"team": team} | ({"id": f"{team}-{ep['id']}"} if "id" in ep else {})))
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    base = tmp_path_factory.mktemp("clients")
    data = base / "d"
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(data)})) as s:
        s.ingestor(clock=lambda: INGESTED).ingest_lines(seed_lines(), "sample")
        assert run_night(s, NightRequest(now=NIGHT)).ok
    grants = {}
    for team in TEAMS.values():
        read, write = tokens(team)
        grants[token_hash(read)] = {"name": f"{team}-reader", "teams": [team], "role": "read"}
        grants[token_hash(write)] = {"name": f"{team}-writer", "teams": [team], "role": "write"}
    config = base / "config.yaml"
    config.write_text(json.dumps({"api": {"tokens": grants}}))  # JSON is YAML
    # Noon today: the bots stamp their messages with the real time, within the ingest's 24 h; no night slot near.
    noon = datetime.now(ZoneInfo("Europe/Amsterdam")).replace(hour=12, minute=0, second=0, microsecond=0)
    env = {"TASKZILLA_CONFIG": str(config), "TASKZILLA_API_TOKEN": ADMIN}
    with worker(data, noon.isoformat(), speed=1, env=env) as w:
        with Client(w.api, token=ADMIN) as admin:
            for team in TEAMS.values():
                assert len(admin.contradictions(team=team)) == 1, team
        yield w
        assert stop(w) == 0
    assert ADMIN not in w.log_path.read_text() and tokens("team-py")[1] not in w.log_path.read_text()


def bot_env(served: Any, team: str) -> dict[str, str]:
    read, write = tokens(team)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}  # never the admin token
    return env | {
        "TASKZILLA_URL": served.api,
        "TASKZILLA_TEAM": team,
        "TASKZILLA_READ_TOKEN": read,
        "TASKZILLA_WRITE_TOKEN": write,
    }


def assert_did_its_work(served: Any, team: str, lang: str, out: Any) -> None:
    """What every bot prints, and what it left in its team's memory (read back as the admin)."""
    print(out.stdout, out.stderr)  # shown when the test fails (pytest -rP: always)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "ingested: 5 new, 0 already present" and lines[-1] == "ok", out.stdout
    assert "contradictions open: 1" in lines and "read token refused a write: 403 forbidden" in lines
    assert any(line.startswith("resolved con_") and line.endswith(f"by {team}-writer") for line in lines)
    cited = [line for line in lines if line.startswith("  [episode] ")]
    assert cited and all(" in #" in line for line in cited)  # author, channel and time
    assert "Draft answer" not in out.stdout  # the bot's own ai-draft is never recalled
    with Client(served.api, token=ADMIN, team=team) as admin:
        assert admin.contradictions() == []
        (done,) = admin.contradictions("resolved")
        assert (done.contradiction.resolution, done.contradiction.resolved_by) == ("new", f"{team}-writer")
        memory = admin.export()
    episodes = {x["id"]: x for x in memory if x["type"] == "episode"}
    mine = [episodes[f"{team}-{lang}-bot-{i}"] for i in range(5)]
    assert [e["status"] for e in mine].count("forgotten") == 1 and mine[3]["status"] == "forgotten"
    assert mine[4]["provenance"] == "ai-draft"  # stored, never recalled
    stones = [x for x in memory if x["type"] == "tombstone" and x["id"] == mine[3]["id"]]
    assert stones and stones[0]["by"] == f"{team}-writer"
    assert {x.get("team") for x in memory if x["type"] in ("episode", "pattern", "contradiction")} == {team}


def test_the_python_bot(served: Any) -> None:
    team = TEAMS["python"]
    env = bot_env(served, team) | {"PYTHONPATH": str(ROOT)}
    out = run([sys.executable, str(EXAMPLES / "python-bot" / "bot.py")], ROOT, env)
    assert_did_its_work(served, team, "py", out)


def test_the_node_bot(served: Any, node_bot: Path) -> None:
    team = TEAMS["node"]
    out = run(["node", str(node_bot)], node_bot.parent, bot_env(served, team))
    assert_did_its_work(served, team, "node", out)


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        service_unavailable("go is not installed (the Go example bot)")
    return found


def test_the_go_bot(served: Any, tmp_path: Path) -> None:
    team = TEAMS["go"]
    # Standard library only: nothing to download (no proxy, no toolchain switch), the module cache unused.
    env = bot_env(served, team) | {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    if not os.access(Path.home(), os.W_OK):
        env["GOCACHE"] = str(tmp_path / "go-build")
    built = run([go_binary(), "build", "-o", str(tmp_path / "go-bot"), "."], EXAMPLES / "go-bot", env, timeout=600)
    assert built.returncode == 0, built.stderr
    out = run([str(tmp_path / "go-bot")], tmp_path, bot_env(served, team))
    assert_did_its_work(served, team, "go", out)
