"""The child-process side of the embedded FalkorDB (``falkordb_server``): spawning redis-server so
that it dies with its owner, stopping a child or a stale server by pid, and the lock and pid files.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so every
child is forked by one daemon thread (:class:`_Spawner`) that lives as long as the process.
Linux only (``prctl``, ``/proc``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from pathlib import Path

import structlog

from taskzilla_sleep.core.errors import StoreError

log = structlog.get_logger(__name__)

_PR_SET_PDEATHSIG = 1
POLL_S = 0.02  # how often a start, attach or kill looks again

Popen = subprocess.Popen[bytes]


def _load_prctl() -> Callable[[int, int, int, int, int], int] | None:
    # Looked up in the parent: the child between fork and exec should run as little as possible.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """The preexec_fn: ask the kernel to SIGTERM the child when its parent (thread) dies."""

    def setup() -> None:
        if _PRCTL is None or _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_PDEATHSIG) failed")
        # The parent may have died between fork() and prctl(); then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


class _Spawner:
    """Runs every Popen on one daemon thread that never exits.

    PR_SET_PDEATHSIG fires when the forking *thread* ends; a child forked by a short-lived thread
    (a thread pool, ``asyncio.to_thread``) would be killed as soon as that thread finished. This
    thread only ends with the process, which is exactly when we want the child to die.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Popen], Future[Popen]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def spawn(self, make: Callable[[], Popen], timeout_s: float) -> Popen:
        with self._mutex:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="falkordb-spawner", daemon=True)
                self._thread.start()
        future: Future[Popen] = Future()
        self._jobs.put((make, future))
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeoutError:
            # Should the spawn still succeed later, kill that child instead of leaking it.
            future.add_done_callback(_kill_late_child)
            raise StoreError(f"spawning redis-server took longer than {timeout_s:.0f} s") from None
        except OSError as exc:
            raise StoreError(f"could not start redis-server: {exc}") from exc
        except subprocess.SubprocessError as exc:
            raise StoreError(f"could not prepare redis-server (prctl failed?): {exc}") from exc

    def _run(self) -> None:
        while True:
            make, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(make())
            except BaseException as exc:  # handed to the caller, never lost in this thread
                future.set_exception(exc)

    def reset_after_fork(self) -> None:
        # A forked child has no spawner thread (only the forking thread survives a fork).
        self._mutex = threading.Lock()
        self._jobs = queue.SimpleQueue()
        self._thread = None


def _kill_late_child(future: Future[Popen]) -> None:
    if future.exception() is None:
        terminate_child(future.result(), timeout_s=5.0)


SPAWNER = _Spawner()
os.register_at_fork(after_in_child=SPAWNER.reset_after_fork)


def terminate_child(proc: Popen, timeout_s: float) -> int | None:
    """SIGTERM, wait, SIGKILL, wait; the exit code, or None if it would not die."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("falkordb_kill", pid=proc.pid, after_s=timeout_s)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    try:
        return proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        return None


def terminate_pid(pid: int, timeout_s: float) -> None:
    """Like terminate_child for a process that is not our child (we cannot wait() for it)."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not is_alive(pid):
                return
            time.sleep(POLL_S)
    raise StoreError(f"stale redis-server pid {pid} would not die")


def is_alive(pid: int) -> bool:
    """True if pid runs; a zombie counts as dead (its parent, maybe init, has yet to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the command name, which is in parentheses and may contain spaces.
    state = stat.rpartition(")")[2].split()[:1]
    return state not in (["Z"], ["X"])


def try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on path, or None if another open file holds it."""
    # O_CLOEXEC (Python's default, spelled out): the lock must not outlive us in a child.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_int(path: Path) -> int | None:
    """The number in a pid or lock file, or None when it is missing or not a number."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a pid."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
