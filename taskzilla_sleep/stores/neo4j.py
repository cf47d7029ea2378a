"""Neo4j 5 through the official driver. Production graph backend."""

from __future__ import annotations

from typing import Any

import neo4j
from neo4j import GraphDatabase, RoutingControl
from neo4j.exceptions import Neo4jError, ServiceUnavailable

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.stores.cypher import INDEXES, KEYS, CypherGraphStore, Row
from taskzilla_sleep.stores.graph import GraphBackend
from taskzilla_sleep.stores.params import refuse_unstorable


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
        try:
            # Creating a driver opens no connection; the first query does, within the timeout.
            self._driver = GraphDatabase.driver(
                uri,
                auth=auth,
                connection_timeout=connect_timeout_s,
                connection_acquisition_timeout=connect_timeout_s * 2,
                max_transaction_retry_time=connect_timeout_s * 3,
            )
        except (ValueError, Neo4jError) as exc:
            raise StoreError(f"neo4j: cannot use {uri}: {exc}") from exc

    def describe(self) -> str:
        return f"neo4j {self._uri} database={self._database}"

    def _run(self, query: str, params: Row | None, routing: RoutingControl) -> list[Row]:
        refuse_unstorable("neo4j", params)  # what FalkorDB cannot carry is refused here too: one behaviour
        try:
            result = self._driver.execute_query(
                query,
                parameters_=params or {},
                database_=self._database,
                routing_=routing,
            )
        except ServiceUnavailable as exc:
            raise StoreError(f"neo4j unreachable at {self._uri}: {exc}") from exc
        except (Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise StoreError(f"neo4j query failed ({self._uri}): {exc}") from exc
        return [r.data() for r in result.records]

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

    def _raw_driver(self) -> Any:
        return self._driver
