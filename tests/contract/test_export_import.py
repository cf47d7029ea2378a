"""A team outgrows the embedded default: export from FalkorDB + Chroma embedded, import into Neo4j +
Chroma server, and the target answers `status` and `recall` exactly as the source did."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep import facts
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.memory_admin import export_team, forget_author, import_team
from taskzilla_sleep.recall import recall
from taskzilla_sleep.settings import Secrets, load_settings
from taskzilla_sleep.status import collect_status
from taskzilla_sleep.stores.ports import Embedder
from tests.contract.test_cycle import NIGHT, TEAM, Stack

QUERIES = ["how many approvals does a pull request need", "when do we deploy", "who is the engineering manager"]


@pytest.fixture
def source(tmp_path: Path, offline_embedder: Embedder) -> Iterator[Stack]:
    from taskzilla_sleep.stores.chroma import ChromaVectorStore
    from taskzilla_sleep.stores.falkordb import open_falkordb

    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path / "source")})
    graph = open_falkordb(tmp_path / "falkordb")
    vectors = ChromaVectorStore.embedded(tmp_path / "chroma", offline_embedder)
    graph.ensure_schema()
    try:
        yield Stack(settings, graph, vectors, offline_embedder, OfflineProvider(offline_embedder))
    finally:
        vectors.close()
        graph.close()


@pytest.fixture
def target(
    tmp_path: Path, offline_embedder: Embedder, neo4j_uri: str, chroma_address: tuple[str, int]
) -> Iterator[Stack]:
    from taskzilla_sleep.stores.chroma import ChromaVectorStore
    from taskzilla_sleep.stores.neo4j import open_neo4j
    from tests.neo4j_service import neo4j_auth

    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path / "target")})
    graph = open_neo4j(neo4j_uri, neo4j_auth())
    graph.delete_all()
    vectors = ChromaVectorStore.server(*chroma_address, offline_embedder)
    vectors.delete_all()
    graph.ensure_schema()
    try:
        yield Stack(settings, graph, vectors, offline_embedder, OfflineProvider(offline_embedder))
    finally:
        graph.delete_all()
        vectors.delete_all()
        vectors.close()
        graph.close()


def observed(s: Stack) -> dict[str, Any]:
    status = collect_status(s.settings, Secrets(), s.graph, s.vectors)
    answers = {
        q: [
            (i.kind, i.id, i.text, round(i.similarity, 4), i.status, i.confidence)
            for i in recall(s.graph, s.vectors, q, NIGHT, k=5)
        ]
        for q in QUERIES
    }
    return {"graph": status.graph_counts, "vectors": status.vector_counts, "recall": answers}


@pytest.mark.neo4j
@pytest.mark.chroma_server
def test_export_from_the_embedded_default_imports_losslessly_into_neo4j_and_chroma_server(
    source: Stack, target: Stack
) -> None:
    source.ingest_sample()
    facts.pin(source.graph, source.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin")
    result = source.night(NIGHT)
    assert result.ok
    assert source.graph.contradictions(TEAM) and source.graph.runs(5)  # the night left beliefs in dispute
    later = NIGHT + timedelta(hours=8)
    (author,) = sorted({e.author for e in source.graph.episodes_by_status(TEAM, ["raw"])})[:1]
    forget_author(source.graph, source.vectors, TEAM, author, "ops", "left the company", later)
    before = observed(source)

    out = io.StringIO()
    counts = export_team(source.graph, source.vectors, TEAM, out)
    assert {"episode", "pattern", "fact", "contradiction", "tombstone", "run", "meta"} <= set(counts)
    report = import_team(target.graph, target.vectors, out.getvalue().splitlines(), source="export.jsonl")
    assert report.counts["episode"] == counts["episode"]

    after = observed(target)
    assert after == before
    again = io.StringIO()
    export_team(target.graph, target.vectors, TEAM, again)
    assert again.getvalue().splitlines()[1:] == out.getvalue().splitlines()[1:]  # all but exported_at
