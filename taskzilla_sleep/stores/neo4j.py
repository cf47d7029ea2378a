"""Neo4j 5 through the official driver: the production graph backend's executor.

Every call is bounded by ``graph.connect_timeout_s``: the driver's connect, handshake and pool
wait use it, and the driver's own transaction retries (up to 30 s by default, restarted on every
call) are replaced by ours, which stop at the same bound. A server found unreachable then stays
"down" for that long (see outage.py), so the calls that follow fail at once with the same cause.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from neo4j import READ_ACCESS, WRITE_ACCESS, GraphDatabase, RoutingControl
from neo4j.exceptions import DriverError, IncompleteCommit, Neo4jError, ServiceUnavailable, SessionExpired

from taskzilla_sleep.core.errors import ConfigError, StoreError
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.cypher.base import WRITE_BATCH
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.outage import Outage
from taskzilla_sleep.stores.params import refuse_unstorable
from taskzilla_sleep.stores.ports import GraphBackend

_FIRST_RETRY_DELAY_S = 0.1
_MAX_RETRY_DELAY_S = 1.0


def open_neo4j(
    uri: str,
    auth: tuple[str, str] | None,
    database: str = "neo4j",
    connect_timeout_s: float = 5.0,
    batch_size: int = WRITE_BATCH,
) -> CypherGraphStore:
    """The graph store on a Neo4j server (no connection is opened until the first query)."""
    return CypherGraphStore(Neo4jExecutor(uri, auth, database, connect_timeout_s), batch_size)


class Neo4jExecutor:
    backend: GraphBackend = "neo4j"

    def __init__(
        self,
        uri: str,
        auth: tuple[str, str] | None,
        database: str = "neo4j",
        connect_timeout_s: float = 5.0,
    ) -> None:
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
        """One transaction, one attempt (``execute_query`` would retry on its own, unbounded by us).
        A read is one statement in an auto-commit transaction: it sees one snapshot all the same,
        and saves the COMMIT's round trip (1.1-1.5 ms against 1.6-3.1 ms for a trivial read on the
        local server: BENCHMARKS.md); a write commits explicitly, to know whether it did."""
        mode = READ_ACCESS if routing is RoutingControl.READ else WRITE_ACCESS
        with self._driver.session(
            database=self._database,
            default_access_mode=mode,
            # The one execute_query uses: reads after our writes stay causally consistent on a cluster.
            bookmark_manager=self._driver.execute_query_bookmark_manager,
        ) as session:
            if routing is RoutingControl.READ:
                return [r.data() for r in session.run(query, params)]
            tx = session.begin_transaction()
            try:
                rows = [r.data() for r in tx.run(query, params)]
                tx.commit()
            finally:
                tx.close()  # a rollback unless committed
        return rows

    def read(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, RoutingControl.READ)

    def write(self, query: str, params: Row | None = None) -> list[Row]:
        return self._run(query, params, RoutingControl.WRITE)

    def ensure_schema(self, keys: Sequence[tuple[str, str]], indexes: Sequence[tuple[str, str]]) -> None:
        for label, prop in keys:
            name = f"{label.lower()}_{prop}_unique"
            self.write(f"CREATE CONSTRAINT {name} IF NOT EXISTS FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE")
        for label, prop in indexes:
            self.write(f"CREATE INDEX {label.lower()}_{prop} IF NOT EXISTS FOR (n:{label}) ON (n.{prop})")

    def close(self) -> None:
        self._driver.close()

    def check_login(self, user: str, has_password: bool) -> None:
        """A refused login is a configuration error naming the variable, not the server's 'missing key';
        an unreachable server is the StoreError the first query would raise."""
        if self.authentication_accepted():
            return
        if not has_password:
            raise ConfigError(
                f"config error: neo4j at {self._uri} requires a password: set TASKZILLA_NEO4J_PASSWORD "
                f"(the password of graph.neo4j_user = {user!r})"
            )
        raise ConfigError(
            f"config error: neo4j at {self._uri} refused user {user!r} with the password in "
            "TASKZILLA_NEO4J_PASSWORD (or NEO4J_PASSWORD): check both"
        )

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
