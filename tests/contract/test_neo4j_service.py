"""The Neo4j test service: a real server answers Bolt, and nothing of it is left afterwards."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
from neo4j import GraphDatabase

from tests.conftest import service_unavailable
from tests.neo4j_service import LAUNCHER_MAIN, neo4j_auth, neo4j_server


def _launcher_pids(work_dir: Path) -> list[int]:
    """Pids of launcher JVMs serving work_dir (none when the server is external or a container)."""
    needle = [LAUNCHER_MAIN.encode(), str(work_dir).encode()]
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and all(part in cmdline for part in needle):
            pids.append(int(entry.name))
    return pids


@pytest.mark.neo4j
@pytest.mark.timeout(600)  # a first run may build the launcher with Maven (up to 5 min) first
def test_neo4j_server_answers_bolt_and_its_process_is_gone_afterwards(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        began = time.monotonic()
        try:
            uri = stack.enter_context(neo4j_server(tmp_path))
        except Exception as exc:  # any reason the service cannot start: skip (or fail if required)
            service_unavailable(f"no Neo4j server could be started: {exc}")
        ready_s = time.monotonic() - began
        print(f"neo4j ready in {ready_s:.1f} s at {uri}")
        if not os.environ.get("NEO4J_URI") and neo4j_auth() is None:
            # The local launcher (the only source without auth): exactly one JVM for this dir.
            assert len(_launcher_pids(tmp_path)) == 1

        with GraphDatabase.driver(uri, auth=neo4j_auth(), connection_timeout=5) as driver:
            records, _, _ = driver.execute_query("RETURN 1 AS one")
            assert [record["one"] for record in records] == [1]

    # The context waits for the JVM, so it must already be gone; no grace period needed.
    assert _launcher_pids(tmp_path) == []


@pytest.mark.neo4j
@pytest.mark.timeout(600)
def test_the_launchers_password_is_in_no_command_line_nor_in_neo4js_logs(tmp_path: Path) -> None:
    from neo4j.exceptions import AuthError

    from tests.neo4j_service import own_neo4j

    password = "launcher-pw-" + os.urandom(6).hex()
    with contextlib.ExitStack() as stack:
        try:
            uri, proc = stack.enter_context(own_neo4j(tmp_path, password=password))
        except Exception as exc:  # any reason the launcher cannot start: skip (or fail if required)
            service_unavailable(f"the local Neo4j launcher could not start: {exc}")
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert LAUNCHER_MAIN.encode() in argv and password.encode() not in argv  # `ps` shows argv to all
        with GraphDatabase.driver(uri, auth=("neo4j", password), connection_timeout=5) as driver:
            assert driver.execute_query("RETURN 1 AS one").records[0]["one"] == 1
        with (
            GraphDatabase.driver(uri, auth=("neo4j", "not-it"), connection_timeout=5) as driver,
            pytest.raises(AuthError),
        ):
            driver.execute_query("RETURN 1")
    logs = list((tmp_path / "neo4j-data").rglob("*.log"))
    debug = [p for p in logs if p.name == "debug.log"]
    assert debug and LAUNCHER_MAIN.encode() in debug[0].read_bytes()  # it does log the command line
    assert all(password.encode() not in p.read_bytes() for p in (tmp_path / "neo4j-data").rglob("*") if p.is_file())
