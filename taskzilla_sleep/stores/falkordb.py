"""FalkorDB, the embedded default graph backend (a redis-server child process on a unix socket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis.exceptions
import structlog
from falkordb import FalkorDB
from redis.backoff import NoBackoff
from redis.retry import Retry

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.stores.cypher import INDEXES, KEYS, CypherGraphStore, Row
from taskzilla_sleep.stores.falkordb_server import EmbeddedFalkorDB
from taskzilla_sleep.stores.graph import GraphBackend
from taskzilla_sleep.stores.params import refuse_unstorable

log = structlog.get_logger(__name__)


class FalkorDBGraphStore(CypherGraphStore):
    backend: GraphBackend = "falkordb"

    def __init__(
        self,
        data_dir: Path,
        graph_name: str = "taskzilla",
        connect_timeout_s: float = 5.0,
        batch_size: int = 500,
    ) -> None:
        super().__init__(batch_size)
        self._dir = data_dir
        self._graph_name = graph_name
        self._timeout = connect_timeout_s
        self._server: EmbeddedFalkorDB | None = None
        self._db: Any = None
        self._graph: Any = None

    @classmethod
    def start(
        cls,
        data_dir: Path,
        graph_name: str = "taskzilla",
        connect_timeout_s: float = 5.0,
        batch_size: int = 500,
    ) -> FalkorDBGraphStore:
        """Start (or join) the embedded server in ``data_dir`` and connect to it."""
        store = cls(data_dir, graph_name, connect_timeout_s, batch_size)
        store.open()
        return store

    def open(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        self._server = EmbeddedFalkorDB(self._dir, start_timeout_s=max(self._timeout, 10.0))
        sock = self._server.start()
        try:
            # No client-side retry with backoff: a dead server must fail fast (redis-py 6 would
            # otherwise spend ~4 s retrying a refused connection on every call).
            self._db = FalkorDB(
                unix_socket_path=str(sock),
                socket_timeout=60,
                socket_connect_timeout=self._timeout,
                retry=Retry(NoBackoff(), 0),
            )
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
        try:
            res = (self._graph.ro_query if read_only else self._graph.query)(query, params or None)
        except redis.exceptions.ConnectionError as exc:
            raise StoreError(f"falkordb unreachable at {self._dir / 'redis.sock'}: {exc}") from exc
        except redis.exceptions.RedisError as exc:
            raise StoreError(f"falkordb query failed: {exc}") from exc
        names = [h[1] if isinstance(h, (list, tuple)) else h for h in (res.header or [])]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
        return [dict(zip(names, row, strict=True)) for row in res.result_set]

    def _read(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, read_only=True)

    def _write(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, read_only=False)

    def _schema_statements(self) -> list[str]:
        # FalkorDB has no IF NOT EXISTS and no constraints in Cypher: plain indexes on our keys
        # (MERGE on an indexed key keeps them unique in practice); "already indexed" is ignored.
        return [f"CREATE INDEX FOR (n:{label}) ON (n.{prop})" for label, prop in KEYS + INDEXES]

    def _write_schema(self, stmt: str) -> None:
        try:
            self._write(stmt)
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
