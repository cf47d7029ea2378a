"""A dead backend fails a command within a small bound of its configured timeout, with a last line
naming the cause: a refused port, a listener that never answers, a server killed mid-night."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tests.e2e.test_cli import ROOT, cli
from tests.e2e.test_concurrency import INGESTED, NIGHT, ledger
from tests.e2e.test_worker import SAMPLE, one_call_at_a_time

TIMEOUT_S = 3.0  # graph.connect_timeout_s / vector.timeout_s in these tests
# What a command may take beyond the timeout: start-up (imports, opening the other store) on a
# loaded 2-core machine; measured 1.5-3 s. The bound: twice the timeout plus that.
STARTUP_S = 8.0
BOUND_S = 2 * TIMEOUT_S + STARTUP_S
# After a kill mid-distill: the LLM calls still in flight, then the failing call, then the exit.
AFTER_KILL_S = 2 * TIMEOUT_S + 5.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _silent_listener() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield int(listener.getsockname()[1])


def _settings(backend: str, port: int) -> dict[str, str]:
    if backend == "neo4j":
        return {
            "TASKZILLA__GRAPH__BACKEND": "neo4j",
            "TASKZILLA__GRAPH__NEO4J_URI": f"bolt://127.0.0.1:{port}",
            "TASKZILLA__GRAPH__CONNECT_TIMEOUT_S": str(TIMEOUT_S),
        }
    return {
        "TASKZILLA__VECTOR__BACKEND": "chroma-server",
        "TASKZILLA__VECTOR__PORT": str(port),
        "TASKZILLA__VECTOR__TIMEOUT_S": str(TIMEOUT_S),
    }


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("backend", ["neo4j", "chroma"])
@pytest.mark.parametrize("dead", ["refused", "silent"])
def test_a_dead_backend_fails_run_once_quickly_naming_it(backend: str, dead: str, tmp_path: Path) -> None:
    with _silent_listener() as silent:
        port = silent if dead == "silent" else _free_port()
        started = time.monotonic()
        res = cli("run-once", "--now", NIGHT, data_dir=tmp_path / "d", env=_settings(backend, port), timeout=120)
        elapsed = time.monotonic() - started
    last = _last_line(res.stderr)
    print(f"{backend} {dead}: exit {res.returncode} after {elapsed:.1f} s (bound {BOUND_S:.0f} s): {last}")
    assert res.returncode == 1, res.stderr[-2000:]
    where = f"bolt://127.0.0.1:{port}" if backend == "neo4j" else f"http://127.0.0.1:{port}"
    assert last.startswith("taskzilla-sleep: ") and f"unreachable at {where}" in last, res.stderr[-2000:]
    if dead == "refused":
        assert "refused" in last.lower()
    assert elapsed < BOUND_S, f"{elapsed:.1f} s: {last}"


def _run_once_with_a_slow_model(data: Path, env: dict[str, str], stub_url: str) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full.update(HF_HUB_OFFLINE="1", **env, **one_call_at_a_time(stub_url))
    return subprocess.Popen(
        [sys.executable, "-m", "taskzilla_sleep", "run-once", "--now", NIGHT, "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        cwd=ROOT,
    )


def _kill_mid_distill(data: Path, env: dict[str, str], kill: object) -> tuple[int, str, float]:
    """Start run-once, kill the backend at the model's third call, return (exit code, last line, seconds after)."""
    from tests.contract.test_cycle_litellm import good_model
    from tests.llm_stub import LLMStub

    assert callable(kill)
    assert cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data, env=env).returncode == 0
    with LLMStub(default=good_model, latency_s=0.2) as stub:
        proc = _run_once_with_a_slow_model(data, env, stub.url)
        try:
            deadline = time.monotonic() + 120
            while len(stub.calls) < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            kill()
            killed_at = time.monotonic()
            _out, err = proc.communicate(timeout=120)
            after = time.monotonic() - killed_at
            print(f"killed mid-distill: exit {proc.returncode} {after:.1f} s after the kill: {_last_line(err)}")
            return proc.returncode, _last_line(err), after
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.neo4j
def test_neo4j_killed_mid_distill(tmp_path: Path) -> None:
    from tests.neo4j_service import own_neo4j

    try:
        server = own_neo4j(tmp_path / "neo4j")
        uri, jvm = server.__enter__()
    except Exception as exc:  # a server we cannot start is "unavailable", as in conftest
        service_unavailable(f"Neo4j could not start: {exc}")
    try:
        env = _settings("neo4j", 0) | {"TASKZILLA__GRAPH__NEO4J_URI": uri}
        code, last, after = _kill_mid_distill(tmp_path / "d", env, jvm.kill)
    finally:
        server.__exit__(None, None, None)
    assert code == 1
    assert last.startswith(f"taskzilla-sleep: neo4j unreachable at {uri}: ") and "refused" in last, last
    assert after < AFTER_KILL_S, f"{after:.1f} s: {last}"


@pytest.mark.chroma_server
def test_chroma_server_killed_mid_distill(tmp_path: Path) -> None:
    from tests.chroma_service import own_chroma

    try:
        server = own_chroma(tmp_path / "chroma")
        _host, port, chroma = server.__enter__()
    except Exception as exc:
        service_unavailable(f"Chroma server could not start: {exc}")
    try:
        code, last, after = _kill_mid_distill(tmp_path / "d", _settings("chroma", port), chroma.kill)
    finally:
        server.__exit__(None, None, None)
    assert code == 1
    # The step's cause, not whatever call came after it ("chroma-server teams failed").
    assert last.startswith("taskzilla-sleep: run-once: distill failed: "), last
    assert f"chroma-server unreachable at http://127.0.0.1:{port}: connection refused" in last
    assert after < AFTER_KILL_S, f"{after:.1f} s: {last}"


def test_embedded_falkordb_killed_mid_distill_is_restarted_and_the_night_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "d"

    def kill_redis() -> None:
        os.kill(int((data / "falkordb" / "redis.pid").read_text()), signal.SIGKILL)

    code, last, after = _kill_mid_distill(data, {}, kill_redis)
    assert code == 0, last
    assert after < AFTER_KILL_S + 10  # the rest of the night, on the restarted server
    assert all(status == "ok" for steps in ledger(data, {}).values() for status in steps.values())
    assert cli("reconcile", "--check", data_dir=data).returncode == 0


@pytest.mark.parametrize("scheme", ["bolt", "neo4j"])
def test_status_with_neo4j_down_is_quick_and_logs_json(scheme: str, tmp_path: Path) -> None:
    """Nothing listens on the Bolt port: status answers within the bound, names the backend and the
    cause, exits 1, and stderr holds JSON lines only (the driver's own error among them), no traceback."""
    port = _free_port()
    env = _settings("neo4j", port) | {"TASKZILLA__GRAPH__NEO4J_URI": f"{scheme}://127.0.0.1:{port}"}
    started = time.monotonic()
    res = cli("status", "--json", data_dir=tmp_path / "d", env=env, timeout=60)
    elapsed = time.monotonic() - started
    print(f"status, {scheme} refused: exit {res.returncode} after {elapsed:.1f} s; stderr {res.stderr!r}")
    assert res.returncode == 1, res.stderr[-2000:]
    assert elapsed < BOUND_S
    graph = json.loads(res.stdout)["graph"]
    assert graph["reachable"] is False and graph["where"].startswith(f"{scheme}://127.0.0.1:{port}")
    assert graph["error"].startswith(f"neo4j unreachable at {scheme}://127.0.0.1:{port}: "), graph["error"]
    assert "Traceback" not in res.stderr
    for line in res.stderr.splitlines():
        event = json.loads(line)  # each line is a JSON event, not the driver's plain text
        assert {"event", "level", "timestamp"} <= set(event), line
