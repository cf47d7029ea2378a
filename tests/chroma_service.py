"""A real Chroma server for the tests: ``chroma run`` from this venv, on a free local port.

``chroma_server(data_dir)`` yields ``(host, port)`` once ``GET /api/v2/heartbeat`` answers and
stops the server when the context exits (SIGTERM, then SIGKILL). On Linux the server also gets
SIGTERM if the test process dies first, so it can't outlive a killed test run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

HOST = "127.0.0.1"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
LOG_NAME = "chroma-server.log"
_START_ATTEMPTS = 3  # the free port can be taken between our probe and the server's bind
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def chroma_server(data_dir: Path) -> Iterator[tuple[str, int]]:
    """Run ``chroma run --path data_dir`` until the context exits; yield (host, port).

    Raises RuntimeError, with the tail of the server's log, if it doesn't come up.
    """
    with own_chroma(data_dir) as (host, port, _process):
        yield host, port


@contextlib.contextmanager
def own_chroma(data_dir: Path) -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    """chroma_server() with its process: for tests that kill it (never the session's shared one)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    executable = Path(sys.executable).parent / "chroma"
    if not executable.is_file():
        raise RuntimeError(f"no chroma executable next to {sys.executable} (is chromadb installed?)")
    log_path = data_dir / LOG_NAME
    failure = ""
    for _ in range(_START_ATTEMPTS):
        port = _free_port()
        process = _start(executable, data_dir, port, log_path)
        try:
            failure = _wait_ready(process, port, log_path)
            if not failure:
                yield HOST, port, process
                return
            exited_by_itself = process.poll() is not None
        finally:
            _stop(process)
        if not (exited_by_itself and "address" in _tail(log_path).lower()):
            break  # not a lost race for the port: another attempt won't help
    raise RuntimeError(failure)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask Linux to SIGTERM it when we die.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(executable: Path, data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    command = [str(executable), "run", "--path", str(data_dir), "--host", HOST, "--port", str(port)]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with log_path.open("ab") as log:
        log.write(f"\n--- {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )


def _wait_ready(process: subprocess.Popen[bytes], port: int, log_path: Path) -> str:
    """'' once the heartbeat answers; otherwise why not, with the log's tail."""
    url = f"http://{HOST}:{port}/api/v2/heartbeat"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return (
                f"chroma server exited with code {process.returncode} before answering "
                f"(log {log_path}):\n{_tail(log_path)}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                if response.status == 200:
                    return ""
        except OSError:
            pass  # not listening yet
        time.sleep(0.1)
    return f"chroma server not ready after {READY_TIMEOUT_S:.0f}s (log {log_path}):\n{_tail(log_path)}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(log_path: Path, lines: int = 40) -> str:
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
