"""A team outgrows the embedded default: export from FalkorDB + Chroma embedded, import into Neo4j +
Chroma server, and the target answers `status` and `recall` exactly as the source did. On every
backend pair: a team copied under a new name in its own stores (`import --as-team`) answers as the
source does and leaves it as it was; a renamed export takes nothing from the team it came from."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.errors import Conflict
from taskzilla_sleep.core.settings import Secrets, load_settings
from taskzilla_sleep.interfaces.status import collect_status
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.memory import facts
from taskzilla_sleep.memory.admin import export_team, forget_author, import_team
from taskzilla_sleep.memory.recall import recall
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.stores.ports import Embedder
from tests.contract.test_cycle import NIGHT, TEAM, Stack
from tests.unit.test_memory_admin import retrailed

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
    result = run_night(source, NightRequest(now=NIGHT, trigger="manual", teams=[TEAM]))  # the team's own job
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
    assert again.getvalue().splitlines()[1:-1] == out.getvalue().splitlines()[1:-1]  # all but exported_at
    trailers = [json.loads(x.getvalue().splitlines()[-1]) for x in (out, again)]  # its checksum covers the header
    assert trailers[0]["counts"] == trailers[1]["counts"] == counts


def answers(s: Stack, team: str) -> dict[str, list[tuple[object, ...]]]:
    """What recall tells ``team`` (ids left out: a copy has its own)."""
    return {
        q: [
            (i.kind, i.text, round(i.similarity, 4), i.status, i.confidence)
            for i in recall(s.graph, s.vectors, q, NIGHT, [team])
        ]
        for q in QUERIES
    }


def without(snapshot: dict[str, Any], team: str) -> dict[str, Any]:
    """A graph snapshot without ``team``'s nodes (its entities and meta keys too) and their relationships."""

    def of_team(props: dict[str, Any]) -> bool:
        key = str(props.get("key", ""))
        return props.get("team") == team or key.startswith(f"{team}/") or key.endswith(f":{team}")

    gone = {n["props"].get("id") or n["props"].get("key") for n in snapshot["nodes"] if of_team(n["props"])}
    return {
        "nodes": [n for n in snapshot["nodes"] if not of_team(n["props"])],
        "relationships": [r for r in snapshot["relationships"] if r["from"][1] not in gone and r["to"][1] not in gone],
    }


def a_team_with_history(s: Stack) -> None:
    s.ingest_sample()
    facts.pin(s.graph, s.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin")
    assert run_night(s, NightRequest(now=NIGHT, trigger="manual", teams=[TEAM])).ok
    (author,) = sorted({e.author for e in s.graph.episodes_by_status(TEAM, ["raw"])})[:1]
    forget_author(s.graph, s.vectors, TEAM, author, "ops", "left the company", NIGHT + timedelta(hours=8))
    assert s.graph.contradictions(TEAM) and s.graph.tombstones(TEAM)


def test_a_team_copied_in_its_own_stores_answers_as_it_does_and_leaves_it_as_it_was(stack: Stack) -> None:
    a_team_with_history(stack)
    source_answers = answers(stack, TEAM)  # recall marks what it read: before the snapshot
    before = stack.snapshot()
    out = io.StringIO()
    counts = export_team(stack.graph, stack.vectors, TEAM, out)
    lines = out.getvalue().split("\n")

    report = import_team(stack.graph, stack.vectors, lines, source="platform.jsonl", as_team="copy")
    left = {k: counts[k] for k in ("run", "change", "archived")}  # the archive holds the source's ids
    assert (report.team, report.copied_from, report.left_out) == ("copy", TEAM, left)
    assert without(stack.snapshot()["graph"], "copy") == before["graph"]  # the source, untouched
    assert {k: v for k, v in stack.snapshot()["vectors"].items() if not k.startswith("copy/")} == before["vectors"]
    assert answers(stack, TEAM) == source_answers
    assert answers(stack, "copy") == source_answers  # the copy is whole: it answers the same
    # Every node and link of the team has its copy (entities, mentions, evidence, links between beliefs).
    no_archive = {"archived_items": 0, "archived_texts": 0, "archived_bytes": 0}  # a copy starts without one
    assert stack.graph.counts("copy") == stack.graph.counts(TEAM).model_copy(update=no_archive)
    links = sorted(x.relation for x in stack.graph.pattern_links("copy"))
    assert links and links == sorted(x.relation for x in stack.graph.pattern_links(TEAM))
    for kind in ("episodes", "patterns"):
        assert stack.vectors.count("copy", kind) == stack.vectors.count(TEAM, kind) > 0
        assert not stack.vectors.present("copy", kind) & stack.vectors.present(TEAM, kind)  # ids of its own


def test_a_renamed_export_takes_nothing_from_the_team_it_came_from(stack: Stack) -> None:
    a_team_with_history(stack)
    out = io.StringIO()
    export_team(stack.graph, stack.vectors, TEAM, out)
    body = [
        x.replace(f'"{TEAM}"', '"renamed"').replace(f'"{TEAM}/', '"renamed/') for x in out.getvalue().splitlines()[:-1]
    ]
    body = [x.replace(f':{TEAM}"', ':renamed"') for x in body]  # the meta keys too
    renamed = retrailed(body)
    before = stack.snapshot()
    for replace in (False, True):
        with pytest.raises(Conflict, match="the target stores hold .* of this file's items under another team"):
            import_team(stack.graph, stack.vectors, renamed, source="renamed.jsonl", replace=replace)
        assert stack.snapshot() == before
