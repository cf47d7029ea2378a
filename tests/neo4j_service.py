"""A real Neo4j 5 server for the tests, from wherever one can be had on this machine.

``neo4j_server(work_dir)`` yields a Bolt URI, trying in this order:

1. env ``NEO4J_URI`` (an external server; credentials from ``NEO4J_USER`` / ``NEO4J_PASSWORD``);
2. a ``neo4j:5.26-community`` container, if a Docker engine answers;
3. the local launcher in ``ops/neo4j-local`` (Neo4j Community in a JVM, auth disabled), built
   with Maven on first use.

``neo4j_auth()`` gives the credentials for the server currently yielded (None: no auth).
``neo4j_server_with_auth(work_dir)`` yields ``(uri, (user, password))`` of a server that refuses
clients without that password (the env or container server when they have one, else a launcher
with auth on). Every
process started here is stopped when the context exits; the launcher also exits by itself when
its stdin closes, so it cannot outlive a test process that is killed.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

CONTAINER_IMAGE = "neo4j:5.26-community"
LAUNCHER_DIR = Path(__file__).resolve().parents[1] / "ops" / "neo4j-local"
LAUNCHER_MAIN = "dev.taskzilla.neo4jlocal.Main"
PASSWORD_ENV = "NEO4J_LOCAL_PASSWORD"  # how the launcher gets its password (Main.java)
READY_TIMEOUT_S = 120.0
BUILD_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 20.0
_CONTAINER_USER = "neo4j"
_CONTAINER_PASSWORD = "taskzilla-test"  # Neo4j wants at least 8 characters

# Credentials of the server the innermost active neo4j_server() yielded; None = no auth.
_auth_stack: list[tuple[str, str] | None] = []


def neo4j_auth() -> tuple[str, str] | None:
    """The (user, password) to use for the server neo4j_server() yielded; None when auth is off."""
    if _auth_stack:
        return _auth_stack[-1]
    if os.environ.get("NEO4J_URI"):
        return _env_auth()
    return None


@contextlib.contextmanager
def neo4j_server(work_dir: Path) -> Iterator[str]:
    """Yield the Bolt URI of a running Neo4j 5; stop whatever was started for it on exit.

    Raises RuntimeError (or the container library's error) when no server can be started.
    """
    uri = os.environ.get("NEO4J_URI")
    if uri:
        with _auth_pushed(_env_auth()):
            yield uri
        return
    if _docker_answers():
        with _container() as (uri, auth), _auth_pushed(auth):
            yield uri
        return
    with _local_launcher(Path(work_dir)) as uri, _auth_pushed(None):
        yield uri


@contextlib.contextmanager
def neo4j_server_with_auth(work_dir: Path) -> Iterator[tuple[str, tuple[str, str]]]:
    """Yield the URI and credentials of a Neo4j 5 that requires them; stop what was started."""
    uri, auth = os.environ.get("NEO4J_URI"), _env_auth()
    if uri and auth is not None:
        yield uri, auth
        return
    if not uri and _docker_answers():
        with _container() as (uri, auth):
            yield uri, auth
        return
    with _local_launcher(Path(work_dir), password=_CONTAINER_PASSWORD) as uri:
        yield uri, (_CONTAINER_USER, _CONTAINER_PASSWORD)


def _env_auth() -> tuple[str, str] | None:
    user = os.environ.get("NEO4J_USER", "neo4j")
    password = os.environ.get("NEO4J_PASSWORD")
    return None if password is None else (user, password)


@contextlib.contextmanager
def _auth_pushed(auth: tuple[str, str] | None) -> Iterator[None]:
    _auth_stack.append(auth)
    try:
        yield
    finally:
        _auth_stack.pop()


# -- Docker --------------------------------------------------------------------------------


def _docker_answers() -> bool:
    """True if a Docker engine answers within 5 s (the CLI or, without one, the Python SDK)."""
    if shutil.which("docker"):
        try:
            done = subprocess.run(["docker", "info"], capture_output=True, timeout=5, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0
    try:
        import docker  # type: ignore[import-untyped]  # testcontainers dependency; honours DOCKER_HOST

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure to reach an engine means "no Docker here"
        return False


@contextlib.contextmanager
def _container() -> Iterator[tuple[str, tuple[str, str]]]:
    # Imported and constructed only here: the constructor raises when no engine is reachable.
    from testcontainers.community.neo4j import Neo4jContainer

    container = Neo4jContainer(CONTAINER_IMAGE, username=_CONTAINER_USER, password=_CONTAINER_PASSWORD)
    with container:
        yield container.get_connection_url(), (container.username, container.password)


# -- the local launcher ----------------------------------------------------------------------


def _launcher_classpath() -> str:
    """target/classes plus the dependency classpath, built with Maven if not there yet or older than
    the launcher's source (a worktree that changed Main.java must not run the Main.class built before)."""
    target = LAUNCHER_DIR / "target"
    cp_file = target / "classpath.txt"
    if not (cp_file.is_file() and (target / "classes").is_dir()) or _stale(cp_file):
        _build_launcher(cp_file)
    return f"{target / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"


def _stale(cp_file: Path) -> bool:
    sources = [LAUNCHER_DIR / "pom.xml", *(LAUNCHER_DIR / "src").rglob("*.java")]
    return max(p.stat().st_mtime for p in sources) > cp_file.stat().st_mtime


def _build_launcher(cp_file: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"{cp_file} is missing and there is no mvn to build it (run `make neo4j-jars`)")
    # Test processes may run in parallel (xdist, two terminals): build once, the others wait.
    lock_path = Path(tempfile.gettempdir()) / "taskzilla-neo4j-local-build.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cp_file.is_file() and (cp_file.parent / "classes").is_dir() and not _stale(cp_file):
            return
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(LAUNCHER_DIR / "pom.xml"),
            "package",
            "dependency:build-classpath",
            "-Dmdep.outputFile=target/classpath.txt",
        ]
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"building the Neo4j launcher took over {BUILD_TIMEOUT_S:.0f} s") from exc
        if done.returncode != 0 or not cp_file.is_file():
            tail = (done.stdout + done.stderr)[-3000:]
            raise RuntimeError(f"building the Neo4j launcher failed ({done.returncode}):\n{tail}")
        cp_file.touch()  # the mark of this build (Maven leaves an unchanged classpath file as it was)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("no java on PATH: the local Neo4j launcher needs Java 17+")
    return java


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _OutputReader:
    """Drains the launcher's stdout for its whole life (a full pipe would block the JVM)."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=200)
        self.ready_uri: str | None = None
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(stream,), name="neo4j-stdout", daemon=True)
        self._thread.start()

    def _run(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("READY ") and self.ready_uri is None:
                self.ready_uri = line.split(" ", 1)[1].strip()
                self.ready.set()

    def tail(self) -> str:
        return "\n".join(self.lines) or "(no output)"

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


@contextlib.contextmanager
def _local_launcher(work_dir: Path, password: str | None = None) -> Iterator[str]:
    with own_neo4j(work_dir, password) as (uri, _proc):
        yield uri


@contextlib.contextmanager
def own_neo4j(work_dir: Path, password: str | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A Neo4j of the test's own from the local launcher, with its process: for tests that kill it
    (the session's shared server must survive them). Auth is off unless ``password`` is given."""
    classpath = _launcher_classpath()
    # Absolute: the launcher runs in work_dir, where a relative path would land one level down.
    data_dir = (work_dir / "neo4j-data").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    cmd = [_java(), "-cp", classpath, LAUNCHER_MAIN, str(data_dir), str(port)]
    # The password goes in the environment (readable by this user only), never in argv: `ps` shows
    # argv to everyone, and Neo4j writes the JVM's command line to its debug.log.
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_ENV} | ({PASSWORD_ENV: password} if password else {})
    began = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=env,
        # Kept open while we run: the launcher exits when it reads EOF, i.e. when we go away.
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=work_dir,
    )
    assert proc.stdout is not None
    reader = _OutputReader(proc.stdout)
    try:
        deadline = began + READY_TIMEOUT_S
        while not reader.ready.wait(0.2):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the Neo4j launcher exited with code {proc.returncode} before READY:\n{reader.tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Neo4j launcher was not READY within {READY_TIMEOUT_S:.0f} s:\n{reader.tail()}")
        assert reader.ready_uri is not None
        yield reader.ready_uri, proc
    finally:
        _stop_launcher(proc)
        reader.join(5.0)  # EOF follows the exit; only then is it safe to close the pipe
        with contextlib.suppress(OSError):
            proc.stdout.close()


def _stop_launcher(proc: subprocess.Popen[str]) -> None:
    """Close stdin (its own exit signal), then SIGTERM, then SIGKILL after STOP_TIMEOUT_S."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(timeout=10)


def servers_env(neo4j_uri: str, chroma_address: tuple[str, int]) -> dict[str, str]:
    """The environment that points a subprocess (the CLI, a worker, a driver) at Neo4j + Chroma server."""
    host, port = chroma_address
    env = {
        "TASKZILLA__GRAPH__BACKEND": "neo4j",
        "TASKZILLA__GRAPH__NEO4J_URI": neo4j_uri,
        "TASKZILLA__VECTOR__BACKEND": "chroma-server",
        "TASKZILLA__VECTOR__HOST": host,
        "TASKZILLA__VECTOR__PORT": str(port),
    }
    auth = neo4j_auth()
    if auth:
        env["TASKZILLA__GRAPH__NEO4J_USER"], env["TASKZILLA_NEO4J_PASSWORD"] = auth
    return env
