"""The contract tier's shared fixture: the cycle's stack on both backend pairs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import Embedder, GraphStore, VectorStore
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


# -- the graph store suites' backends (test_graph_store.py, test_archive_store.py) --------------------
# One real store per backend and module (opening one, and Neo4j's schema statements, cost more than
# a test), emptied after each test, so every test starts on an empty graph. The fake is built fresh
# for each test.


@pytest.fixture(scope="module")
def falkordb_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphStore]:
    from taskzilla_sleep.stores.falkordb import open_falkordb

    store = open_falkordb(tmp_path_factory.mktemp("falkordb"), batch_size=7)
    store.ensure_schema()
    store.delete_all()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="module")
def neo4j_store(neo4j_uri: str) -> Iterator[GraphStore]:
    from taskzilla_sleep.stores.neo4j import open_neo4j
    from tests.neo4j_service import neo4j_auth

    store = open_neo4j(neo4j_uri, neo4j_auth(), batch_size=7)
    store.ensure_schema()
    store.delete_all()  # what another module on the same server left
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=["memory", "falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graph_store(request: pytest.FixtureRequest) -> Iterator[GraphStore]:
    store: GraphStore
    if request.param == "memory":
        store = MemoryGraphStore()
        store.ensure_schema()
    else:
        store = request.getfixturevalue(f"{request.param}_store")  # emptied by the test before
    try:
        yield store
    finally:
        store.delete_all()
