"""FalkorDB, the embedded default graph backend (a redis-server child process on a unix socket): its executor.

Several processes may use one data dir: the first runs the server (EmbeddedFalkorDB), the others
attach to it (`status`, `recall`, `contradictions resolve` while a worker runs; a second worker,
a run-once waiting for the lease). When the server stops under them — its owner exited, or it
died — the next call hands it over: whoever takes the data dir's flock first starts a new server
on the same files, the others attach to that one, and the call is sent again if that is safe: a
query that never reached the old server (connect or send failed) and any read. A write lost in
flight may or may not have been applied, so it fails (StoreError; rerunning the step repairs it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
import redis.exceptions
import structlog
from falkordb import FalkorDB
from redis.backoff import NoBackoff
from redis.retry import Retry

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.cypher.base import WRITE_BATCH
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.falkordb_server import EmbeddedFalkorDB
from taskzilla_sleep.stores.outage import Outage
from taskzilla_sleep.stores.params import refuse_unstorable
from taskzilla_sleep.stores.ports import GraphBackend

log = structlog.get_logger(__name__)

# A query that has not answered after this long fails (a wedged server, not a slow query: the
# heaviest of a month of a busy team take well under a second).
_QUERY_TIMEOUT_S = 60.0
_HANDOVER_POLL_S = 0.05


class _NotSent(redis.exceptions.ConnectionError):
    """The command never reached the server (connecting or sending failed): safe to send again."""


class _Connection(redis.UnixDomainSocketConnection):
    """Tells a command that was never sent from one lost in flight (redis-py raises ConnectionError for both)."""

    def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
        try:
            super().connect_check_health(check_health=check_health, retry_socket_connect=retry_socket_connect)
        except _NotSent:
            raise
        except redis.exceptions.ConnectionError as exc:
            raise _NotSent(str(exc)) from exc

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            super().send_packed_command(command, check_health=check_health)  # type: ignore[no-untyped-call]
        except _NotSent:
            raise
        except redis.exceptions.ConnectionError as exc:
            # A failed send reached no server that could run it: redis only runs a whole command.
            raise _NotSent(str(exc)) from exc


def open_falkordb(
    data_dir: Path,
    graph_name: str = "taskzilla",
    connect_timeout_s: float = 5.0,
    batch_size: int = WRITE_BATCH,
) -> CypherGraphStore:
    """The graph store on the embedded FalkorDB of ``data_dir``, started (or joined) now."""
    executor = FalkorDBExecutor(data_dir, graph_name, connect_timeout_s)
    executor.open()
    return CypherGraphStore(executor, batch_size)


class FalkorDBExecutor:
    backend: GraphBackend = "falkordb"

    def __init__(self, data_dir: Path, graph_name: str = "taskzilla", connect_timeout_s: float = 5.0) -> None:
        self._dir = data_dir
        self._graph_name = graph_name
        self._timeout = connect_timeout_s
        self._server: EmbeddedFalkorDB | None = None
        self._db: Any = None
        self._graph: Any = None
        self._handover = threading.Lock()  # the API threads and the lease renewer may all notice at once
        self._outage = Outage(connect_timeout_s)

    def open(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        self._server = EmbeddedFalkorDB(self._dir, start_timeout_s=max(self._timeout, 10.0))
        sock = self._server.start()
        try:
            # No client-side retry with backoff: a dead server must fail fast (redis-py 6 would
            # otherwise spend ~4 s retrying a refused connection on every call).
            pool = redis.ConnectionPool(
                connection_class=_Connection,
                path=str(sock),
                socket_timeout=_QUERY_TIMEOUT_S,
                socket_connect_timeout=self._timeout,
                retry=Retry(NoBackoff(), 0),
                decode_responses=True,  # what FalkorDB's own client asks for; a pool of ours must too
            )
            self._db = FalkorDB(connection_pool=pool)
            self._graph = self._db.select_graph(self._graph_name)
        except redis.exceptions.RedisError as exc:
            self._server.stop()
            raise StoreError(f"falkordb: cannot connect to {sock}: {exc}") from exc

    def describe(self) -> str:
        return f"falkordb {self._dir / 'redis.sock'} graph={self._graph_name}"

    def _run(self, query: str, params: Row | None, read_only: bool) -> list[Row]:
        if self._graph is None:
            raise StoreError("falkordb: store is not open")
        refuse_unstorable("falkordb", params)
        self._outage.check()
        sock = self._dir / "redis.sock"
        deadline = time.monotonic() + max(self._timeout, 10.0)  # a hand-over may start a server
        while True:
            try:
                res = (self._graph.ro_query if read_only else self._graph.query)(query, params or None)
                break
            except redis.exceptions.ConnectionError as exc:
                sent = not isinstance(exc, _NotSent)
                self._hand_over(exc, deadline)
                if sent and not read_only:
                    raise StoreError(
                        f"falkordb at {sock}: the server stopped while a write was in flight; it may or may "
                        f"not have been applied (rerunning the step repairs it): {exc}"
                    ) from exc
            except redis.exceptions.RedisError as exc:
                raise StoreError(f"falkordb query failed: {exc}") from exc
        names = [h[1] if isinstance(h, (list, tuple)) else h for h in (res.header or [])]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
        return [dict(zip(names, row, strict=True)) for row in res.result_set]

    def _hand_over(self, exc: Exception, deadline: float) -> None:
        """The server stopped answering: make sure one runs again on this data dir (maybe ours), or raise."""
        with self._handover:
            server = self._server
            if server is None:
                raise StoreError("falkordb: store is closed") from exc
            if server.answering():
                # Another thread (or another process) already brought one up; or the old one is
                # still shutting down, and the next attempt will tell.
                if time.monotonic() > deadline:
                    raise self._outage.down(f"falkordb at {self._dir}: the server keeps dropping us: {exc}") from exc
                time.sleep(_HANDOVER_POLL_S)
                return
            previous = server.pid
            server.stop()  # ours and dead: reap it and free the flock; another owner's: forget it
            try:
                server.start()  # the flock free: start one on the same files; else attach to the new owner's
            except StoreError as err:
                raise self._outage.down(
                    f"falkordb at {self._dir}: the server (pid {previous}) stopped and none could be started "
                    f"again: {err}"
                ) from err
            log.warning(
                "falkordb_handed_over", previous_pid=previous, pid=server.pid, owner=server.owner, cause=str(exc)[:200]
            )

    def read(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, read_only=True)

    def write(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, read_only=False)

    def ensure_schema(self, keys: Sequence[tuple[str, str]], indexes: Sequence[tuple[str, str]]) -> None:
        # FalkorDB has no IF NOT EXISTS and no constraints in Cypher: plain indexes on our keys
        # (MERGE on an indexed key keeps them unique in practice); "already indexed" is ignored.
        for label, prop in [*keys, *indexes]:
            try:
                self.write(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
            except StoreError as exc:
                if "already indexed" not in str(exc).lower():
                    raise

    def close(self) -> None:
        if self._db is not None:
            try:
                self._db.connection.close()
            except redis.exceptions.RedisError:
                log.debug("falkordb_close_failed")
            self._db = None
            self._graph = None
        if self._server is not None:
            self._server.stop()
            self._server = None
