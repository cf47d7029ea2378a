"""The seam between the Cypher graph store and a server: the only dialect code is behind it.

``CypherGraphStore`` runs named queries (``stores/queries``) through a :class:`QueryExecutor`; the
two executors (``neo4j.py``, ``falkordb.py``) own the connection, the timeouts and retries, how a
query is sent and how rows come back, and the schema statements of their dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from taskzilla_sleep.stores.ports import GraphBackend

Row = dict[str, Any]


class QueryExecutor(Protocol):
    backend: GraphBackend

    def read(self, query: str, params: Row | None = None) -> list[Row]:
        """Run a read-only query; one row a dict of the RETURN names."""
        ...

    def write(self, query: str, params: Row | None = None) -> list[Row]:
        """Run a write as ONE transaction (Neo4j) / one atomic query (FalkorDB)."""
        ...

    def ensure_schema(self, keys: Sequence[tuple[str, str]], indexes: Sequence[tuple[str, str]]) -> None:
        """Unique keys (label, property) and secondary indexes, in the dialect's syntax. Idempotent."""
        ...

    def describe(self) -> str:
        """Where it is, for status lines and errors (never a password)."""
        ...

    def close(self) -> None: ...
