"""The graph store in Cypher, one class for Neo4j and FalkorDB: named queries through an executor.

Each aggregate of ``stores/ports.py`` is one part here (episodes, patterns, contradictions, the run
ledger, the alert outbox, the lease, console sessions, the graph as a whole); ``CypherGraphStore``
combines them over one :class:`~taskzilla_sleep.stores.executor.QueryExecutor`. Build one with
``stores.neo4j.open_neo4j`` or ``stores.falkordb.open_falkordb``.
"""

from __future__ import annotations

from taskzilla_sleep.stores.cypher.admin import CypherAdmin
from taskzilla_sleep.stores.cypher.base import WRITE_BATCH
from taskzilla_sleep.stores.cypher.contradictions import CypherContradictions
from taskzilla_sleep.stores.cypher.episodes import CypherEpisodes
from taskzilla_sleep.stores.cypher.lease import CypherLease
from taskzilla_sleep.stores.cypher.ledger import CypherLedger
from taskzilla_sleep.stores.cypher.outbox import CypherOutbox
from taskzilla_sleep.stores.cypher.patterns import CypherPatterns
from taskzilla_sleep.stores.cypher.sessions import CypherSessions
from taskzilla_sleep.stores.executor import QueryExecutor
from taskzilla_sleep.stores.ports import GraphBackend, GraphStore


class CypherGraphStore(
    CypherEpisodes,
    CypherPatterns,
    CypherContradictions,
    CypherLedger,
    CypherOutbox,
    CypherLease,
    CypherSessions,
    CypherAdmin,
):
    """Implements ``ports.GraphStore`` (the archive through ``CypherAdmin``, which wipes it with a team)."""

    def __init__(self, executor: QueryExecutor, batch_size: int = WRITE_BATCH) -> None:
        super().__init__(executor, batch_size)
        self.backend: GraphBackend = executor.backend


__all__ = ["CypherGraphStore"]


def _implements_the_port(store: CypherGraphStore) -> GraphStore:
    return store  # mypy checks here that the class has every method of the port, with its types
