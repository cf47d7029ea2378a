"""Neo4j 5 through the official driver. Production graph backend.

Every call is bounded by ``graph.connect_timeout_s``: the driver's connect, handshake and pool
wait use it, and the driver's own transaction retries (up to 30 s by default, restarted on every
call) are replaced by ours, which stop at the same bound. A server found unreachable then stays
"down" for that long (see outage.py), so the calls that follow fail at once with the same cause.
"""

from __future__ import annotations

import re
import time

from neo4j import READ_ACCESS, WRITE_ACCESS, GraphDatabase, RoutingControl
from neo4j.exceptions import DriverError, IncompleteCommit, Neo4jError, ServiceUnavailable, SessionExpired

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.stores.cypher import INDEXES, KEYS, CypherGraphStore, Row
from taskzilla_sleep.stores.graph import GraphBackend
from taskzilla_sleep.stores.outage import Outage
from taskzilla_sleep.stores.params import refuse_unstorable

_FIRST_RETRY_DELAY_S = 0.1
_MAX_RETRY_DELAY_S = 1.0


class Neo4jGraphStore(CypherGraphStore):
    backend: GraphBackend = "neo4j"

    def __init__(
        self,
        uri: str,
        auth: tuple[str, str] | None,
        database: str = "neo4j",
        connect_timeout_s: float = 5.0,
        batch_size: int = 500,
    ) -> None:
        super().__init__(batch_size)
        self._uri = uri
        self._database = database
        self._timeout = connect_timeout_s
        self._outage = Outage(connect_timeout_s)
        try:
            # Creating a driver opens no connection; the first query does, within the timeout.
            self._driver = GraphDatabase.driver(
                uri,
                auth=auth,
                connection_timeout=connect_timeout_s,
                # The pool wait includes opening a connection: the same bound, not a second one on top.
                connection_acquisition_timeout=connect_timeout_s,
            )
        except (ValueError, Neo4jError) as exc:
            raise StoreError(f"neo4j: cannot use {uri}: {exc}") from exc

    def describe(self) -> str:
        return f"neo4j {self._uri} database={self._database}"

    def _run(self, query: str, params: Row | None, routing: RoutingControl) -> list[Row]:
        refuse_unstorable("neo4j", params)  # what FalkorDB cannot carry is refused here too: one behaviour
        self._outage.check()
        deadline = time.monotonic() + self._timeout
        delay = _FIRST_RETRY_DELAY_S
        while True:
            try:
                rows = self._transaction(query, params or {}, routing)
            except (Neo4jError, DriverError) as exc:
                # Retryable: a deadlock, a leader switch, a connection that could not be opened
                # or broke before the commit. Not retryable, among others: IncompleteCommit (the
                # commit was sent, its outcome is unknown).
                if exc.is_retryable() and time.monotonic() + delay < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, _MAX_RETRY_DELAY_S)
                    continue
                if isinstance(exc, IncompleteCommit):
                    raise StoreError(
                        f"neo4j at {self._uri}: the connection broke during a commit, whose outcome is unknown "
                        f"(a rerun repairs it): {_one_line(exc)}"
                    ) from exc
                if isinstance(exc, (ServiceUnavailable, SessionExpired)):
                    raise self._outage.down(f"neo4j unreachable at {self._uri}: {_one_line(exc)}") from exc
                raise StoreError(f"neo4j query failed ({self._uri}): {_one_line(exc)}") from exc
            except OSError as exc:
                raise self._outage.down(f"neo4j unreachable at {self._uri}: {_one_line(exc)}") from exc
            return rows

    def _transaction(self, query: str, params: Row, routing: RoutingControl) -> list[Row]:
        """One explicit transaction, one attempt (``execute_query`` would retry on its own, unbounded by us)."""
        mode = READ_ACCESS if routing is RoutingControl.READ else WRITE_ACCESS
        with self._driver.session(
            database=self._database,
            default_access_mode=mode,
            # The one execute_query uses: reads after our writes stay causally consistent on a cluster.
            bookmark_manager=self._driver.execute_query_bookmark_manager,
        ) as session:
            tx = session.begin_transaction()
            try:
                rows = [r.data() for r in tx.run(query, params)]
                tx.commit()
            finally:
                tx.close()  # a rollback unless committed
        return rows

    def _read(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, RoutingControl.READ)

    def _write(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, RoutingControl.WRITE)

    def _schema_statements(self) -> list[str]:
        stmts = [
            f"CREATE CONSTRAINT {label.lower()}_{prop}_unique IF NOT EXISTS FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE"
            for label, prop in KEYS
        ]
        stmts += [
            f"CREATE INDEX {label.lower()}_{prop} IF NOT EXISTS FOR (n:{label}) ON (n.{prop})"
            for label, prop in INDEXES
        ]
        return stmts

    def close(self) -> None:
        self._driver.close()

    def authentication_accepted(self) -> bool:
        """Does the server accept our credentials? StoreError (one line) when it cannot be reached."""
        self._outage.check()
        try:
            return bool(self._driver.verify_authentication())
        except (Neo4jError, DriverError, OSError) as exc:
            raise self._outage.down(f"neo4j unreachable at {self._uri}: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    """The driver's messages span lines; an error line for a person (and a log field) should not."""
    return re.sub(r"\s+", " ", str(exc)).strip()
