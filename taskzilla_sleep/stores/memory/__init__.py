"""In-memory fakes of both stores, for unit tests: the same protocols and observable behaviour.

The graph fake is split like ``stores/cypher`` (episodes, beliefs, ledger/outbox/lease, admin);
``tests/contract/test_graph_store.py`` runs its assertions on it, FalkorDB and Neo4j alike, so a
fake that drifts from the real backends is caught.
"""

from __future__ import annotations

from taskzilla_sleep.stores.memory.admin import MemoryGraphStore
from taskzilla_sleep.stores.memory.vectors import HashEmbedder, MemoryVectorStore
from taskzilla_sleep.stores.ports import GraphStore, VectorStore

__all__ = ["HashEmbedder", "MemoryGraphStore", "MemoryVectorStore"]


def _implements_the_ports(graph: MemoryGraphStore, vectors: MemoryVectorStore) -> tuple[GraphStore, VectorStore]:
    return graph, vectors  # mypy checks here that the fakes have every method of the ports, with their types
