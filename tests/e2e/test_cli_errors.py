"""Bad configs, env values, arguments and data dirs: one line on stderr and the documented exit code
(1 failure or bad input, 2 usage or configuration), never a traceback, never a secret."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli, episodes

PASSWORD = "s3cret-pass-in-the-uri"


def cli_cmd() -> list[str]:
    return [sys.executable, "-m", "taskzilla_sleep"]


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    """The error line; argparse's own errors come after its usage block, as for every CLI."""
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    if lines and lines[0].startswith("usage: "):
        lines = [ln for ln in lines if ln.startswith("taskzilla-sleep")]
    assert len(lines) == 1, res.stderr[-2000:]
    return lines[0]


def _files(tmp: Path) -> None:
    (tmp / "latin1.yaml").write_bytes(b"graph:\n  backend: falkordb  # caf\xe9\n")
    (tmp / "deep.yaml").write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp / "list.yaml").write_text("- graph\n- vector\n")
    (tmp / "port.yaml").write_text("api:\n  port: 99999\n")
    (tmp / "a-file").write_text("not a directory\n")
    (tmp / "deep.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")


CONFIG_ERRORS = [
    # (arguments, env, expected in the one line); {t} is the test's tmp_path
    (["--config", "{t}/latin1.yaml"], {}, "{t}/latin1.yaml: not UTF-8 text (invalid continuation byte at byte 33)"),
    (["--config", "{t}/deep.yaml"], {}, "{t}/deep.yaml: nested too deeply"),
    (["--config", "{t}"], {}, "cannot read {t}: Is a directory"),
    (["--config", "{t}/list.yaml"], {}, "the top level must be a mapping"),
    (["--config", "{t}/port.yaml"], {}, "api.port = 99999"),
    (
        ["--set", "graph.backend=neo4j", "--set", "graph.neo4j_uri=http://127.0.0.1:7474"],
        {},
        "the scheme must be one of neo4j, neo4j+s, neo4j+ssc, bolt, bolt+s, bolt+ssc",
    ),
    (["--set", "graph.neo4j_uri=bolt://127.0.0.1:99999"], {}, "graph.neo4j_uri = 'bolt://127.0.0.1:99999'"),
    (["--set", "vector.host=http://chroma:8000"], {}, "vector.host = 'http://chroma:8000'"),
    (["--set", "graph.backend=[neo4j"], {}, "graph.backend = '[neo4j' (from command line)"),
    ([], {"TASKZILLA_LOG_LEVEL": "loud"}, "TASKZILLA_LOG_LEVEL = 'loud': must be one of debug, info, warning"),
    (["--data-dir", "{t}/a-file"], {}, "data dir {t}/a-file is a file, not a directory: make it writable, or"),
    (["--data-dir", "{t}/a-file/sub"], {}, "data dir {t}/a-file/sub cannot be created, a parent is a file"),
    (["--data-dir", ""], {}, "argument --data-dir: an empty path is not allowed"),
]


@pytest.mark.parametrize(("args", "env", "expected"), CONFIG_ERRORS)
def test_a_bad_setting_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    _files(tmp_path)
    res = cli("status", *[a.format(t=tmp_path) for a in args], env=env)
    assert res.returncode == 2, res.stderr[-2000:]
    assert expected.format(t=tmp_path) in one_line(res)


USAGE_ERRORS = [
    (["recall", "x", "--team", "a b"], "argument --team: invalid team name 'a b'"),
    (["run-once", "--dry-run", "--team", "a b"], "argument --team: invalid team name 'a b'"),
    (["facts", "pin", "a fact", "--by", "me", "--team", "a/b"], "argument --team: invalid team name 'a/b'"),
    (["worker", "--api-port", "99999"], "argument --api-port: not a port number (0-65535): '99999'"),
    (["report", "--html", "{t}"], "--html {t} is a directory"),
    (["report", "--html", "{t}/a-file/r.html"], "the HTML report's directory {t}/a-file is a file"),
    # Every subcommand's time, team and port go through the same types (once two copies had drifted:
    # the memory and audit commands took a year-1 time the stores cannot hold).
    (
        ["audit", "list", "--since", "0001-01-01T00:00:00+00:00"],
        "argument --since: '0001-01-01T00:00:00+00:00' is outside",
    ),
    (
        [
            "patterns",
            "release",
            "p1",
            "--team",
            "t",
            "--by",
            "me",
            "--reason",
            "x",
            "--now",
            "0001-01-01T00:00:00+00:00",
        ],
        "is outside the years",
    ),
    (["patterns", "list", "--team", "a/b"], "argument --team: invalid team name 'a/b': 1-48 letters"),
]


@pytest.mark.parametrize(("args", "expected"), USAGE_ERRORS)
def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    _files(tmp_path)
    res = cli(*[a.format(t=tmp_path) for a in args], data_dir=tmp_path / "data")
    assert res.returncode == 2, res.stderr[-2000:]
    assert expected.format(t=tmp_path) in one_line(res)


def test_json_nested_100k_deep_is_a_bad_line_not_a_recursion_error(tmp_path: Path) -> None:
    _files(tmp_path)
    res = cli("ingest", str(tmp_path / "deep.jsonl"), data_dir=tmp_path / "data")
    assert res.returncode == 1
    assert f"{tmp_path}/deep.jsonl:1: JSON nested too deeply" in one_line(res)
    res = cli("ingest", "-", data_dir=tmp_path / "data", stdin="[" * 100_000 + "]" * 100_000 + "\n")
    assert res.returncode == 1 and "<stdin>:1: JSON nested too deeply" in one_line(res)


def test_stdin_that_is_not_utf8_is_named_like_a_file(tmp_path: Path) -> None:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    cmd = [*cli_cmd(), "ingest", "-", "--data-dir", str(tmp_path / "data")]
    res = subprocess.run(cmd, input=b"\xff\n", capture_output=True, timeout=120, env=full_env, check=False)
    stderr = res.stderr.decode()
    assert res.returncode == 1 and "Traceback" not in stderr
    assert stderr.strip() == "taskzilla-sleep: <stdin>: not UTF-8 text (invalid start byte at byte 0)"


def test_line_separators_inside_a_json_string_do_not_split_the_line(tmp_path: Path) -> None:
    lines = episodes(3).splitlines()
    texts = []
    for i, char in enumerate(["\u2028", "\u2029", "\u0085"]):
        obj = json.loads(lines[i])
        obj["text"] = f"keep pull requests small{char}and scoped, note {i}"
        lines[i] = json.dumps(obj, ensure_ascii=False)
        assert char in lines[i]  # raw, not \\u-escaped: what str.splitlines() broke
        texts.append(obj["text"])
    path = tmp_path / "seps.jsonl"
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")  # CRLF files still work
    res = cli("ingest", str(path), "--json", data_dir=tmp_path / "data")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["new"] == 3
    res = cli("ingest", "-", "--json", data_dir=tmp_path / "data", stdin="\n".join(lines) + "\n")
    assert res.returncode == 0 and json.loads(res.stdout)["present"] == 3
    got = cli("recall", "scoped pull requests", "-k", "5", "--json", data_dir=tmp_path / "data")
    assert {item["text"] for item in json.loads(got.stdout)} >= set(texts), got.stdout


@pytest.mark.parametrize("where", ["flag", "env", "config"])
def test_a_password_in_the_neo4j_uri_is_refused_and_never_printed(tmp_path: Path, where: str) -> None:
    uri = f"bolt://neo4j:{PASSWORD}@127.0.0.1:1"
    args: list[str] = ["--set", "graph.backend=neo4j"]
    env = {"TASKZILLA_LOG_LEVEL": "debug"}
    if where == "flag":
        args += ["--set", f"graph.neo4j_uri={uri}"]
    elif where == "env":
        env["TASKZILLA__GRAPH__NEO4J_URI"] = uri
    else:
        (tmp_path / "c.yaml").write_text(f"graph:\n  neo4j_uri: {uri}\n")
        args += ["--config", str(tmp_path / "c.yaml")]
    res = cli("status", *args, data_dir=tmp_path / "data", env=env)
    assert res.returncode == 2
    line = one_line(res)
    assert "graph.neo4j_uri = 'bolt://***@127.0.0.1:1'" in line and "TASKZILLA_NEO4J_PASSWORD" in line
    assert PASSWORD not in res.stdout + res.stderr


def test_a_fresh_data_dir_has_a_healthy_status(tmp_path: Path) -> None:
    res = cli("status", "--json", data_dir=tmp_path / "new")
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    assert json.loads(res.stdout)["graph"]["reachable"] is True


def _read_only(path: Path) -> list[str]:
    """A command prefix under which ``path`` is read-only: a private read-only bind mount (root
    ignores permission bits) or, for anyone else, no write bit."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    assert unshare, "root needs unshare(1) to mount the data dir read-only"
    return [unshare, "--mount", "sh", "-c", f'mount --bind -o ro "{path}" "{path}" && exec "$@"', "sh"]


def test_a_read_only_data_dir_is_one_line_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "e.jsonl").write_text(episodes(3))
    assert cli("ingest", str(tmp_path / "e.jsonl"), data_dir=data).returncode == 0
    prefix = _read_only(data)
    try:
        for args in (["status"], ["ingest", str(tmp_path / "e.jsonl")], ["recall", "review"]):
            cmd = [*prefix, *cli_cmd(), *args, "--data-dir", str(data)]
            env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | {"HF_HUB_OFFLINE": "1"}
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
            assert res.returncode == 2, (args, res.stdout, res.stderr[-2000:])
            line = one_line(res)
            assert str(data) in line and ("read-only" in line or "not writable" in line), line
            assert "--data-dir" in line
    finally:
        data.chmod(0o755)


@pytest.fixture(scope="module")
def neo4j_with_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, tuple[str, str]]]:
    from tests.conftest import _hold
    from tests.neo4j_service import neo4j_server_with_auth

    yield from _hold(neo4j_server_with_auth(tmp_path_factory.mktemp("neo4j-auth")), "Neo4j with auth")


@pytest.mark.neo4j
@pytest.mark.timeout(600)
def test_neo4j_that_wants_a_password_names_the_variable(
    tmp_path: Path, neo4j_with_auth: tuple[str, tuple[str, str]]
) -> None:
    uri, (user, password) = neo4j_with_auth
    args = ["--set", "graph.backend=neo4j", "--set", f"graph.neo4j_uri={uri}", "--set", f"graph.neo4j_user={user}"]
    res = cli("status", *args, data_dir=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr[-2000:]
    line = one_line(res)
    assert "requires a password: set TASKZILLA_NEO4J_PASSWORD" in line and "scheme" not in line
    wrong = "not-the-password-42"
    res = cli("status", *args, data_dir=tmp_path, env={"TASKZILLA_NEO4J_PASSWORD": wrong})
    assert res.returncode == 2 and f"refused user {user!r}" in one_line(res)
    assert wrong not in res.stdout + res.stderr
    res = cli("status", *args, data_dir=tmp_path, env={"TASKZILLA_NEO4J_PASSWORD": password})
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]


def test_an_api_port_in_use_is_one_line_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = cli("worker", "--api-port", str(port), data_dir=tmp_path / "data", timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"the API cannot listen on 127.0.0.1:{port} (Address already in use)" in one_line(res)


def test_an_mcp_port_in_use_is_one_line_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = cli("mcp", "--transport", "http", "--port", str(port), data_dir=tmp_path / "data", timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"the MCP server cannot listen on 127.0.0.1:{port} (Address already in use)" in one_line(res)
