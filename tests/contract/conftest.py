"""The contract tier's shared fixture: the cycle's stack on both backend pairs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.settings import load_settings
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.ports import Embedder, VectorStore
from tests.contract.test_cycle import Stack


@pytest.fixture(
    params=[
        "falkordb+chroma-embedded",
        pytest.param("neo4j+chroma-server", marks=[pytest.mark.neo4j, pytest.mark.chroma_server]),
    ]
)
def stack(request: pytest.FixtureRequest, tmp_path: Path, offline_embedder: Embedder) -> Iterator[Stack]:
    from taskzilla_sleep.stores.chroma import ChromaVectorStore

    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})
    graph: CypherGraphStore
    if request.param.startswith("falkordb"):
        from taskzilla_sleep.stores.falkordb import open_falkordb

        graph = open_falkordb(tmp_path / "falkordb")
        vectors: VectorStore = ChromaVectorStore.embedded(tmp_path / "chroma", offline_embedder)
    else:
        from taskzilla_sleep.stores.neo4j import open_neo4j
        from tests.neo4j_service import neo4j_auth

        graph = open_neo4j(request.getfixturevalue("neo4j_uri"), neo4j_auth())
        graph.delete_all()
        host, port = request.getfixturevalue("chroma_address")
        vectors = ChromaVectorStore.server(host, port, offline_embedder)
        vectors.delete_all()
    graph.ensure_schema()
    try:
        yield Stack(settings, graph, vectors, offline_embedder, OfflineProvider(offline_embedder))
    finally:
        graph.delete_all()
        vectors.delete_all()
        vectors.close()
        graph.close()
