"""One suite, every graph backend: the in-memory fake, embedded FalkorDB and a real Neo4j server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from taskzilla_sleep.entities import EntityExtractor
from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.models import Episode, EpisodeStatus, Provenance
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import GraphStore

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NASTY = "He said \"ship it\" \\o/ — `code` {curly} [x] 'q' 😀\nsecond line\ttab"


@pytest.fixture(params=["memory", "falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    store: GraphStore
    if request.param == "memory":
        store = MemoryGraphStore()
    elif request.param == "falkordb":
        from taskzilla_sleep.stores.falkordb import open_falkordb

        store = open_falkordb(tmp_path / "falkordb", batch_size=7)
    else:
        from taskzilla_sleep.stores.neo4j import open_neo4j
        from tests.neo4j_service import neo4j_auth

        uri = request.getfixturevalue("neo4j_uri")
        store = open_neo4j(uri, neo4j_auth(), batch_size=7)
        store.delete_all()
    store.ensure_schema()
    try:
        yield store
    finally:
        store.delete_all()
        store.close()


def ep(i: int, team: str = "platform", text: str | None = None, **over: object) -> Episode:
    base: dict[str, object] = {
        "id": f"ep-{team}-{i}",
        "team": team,
        "channel": "dev",
        "author": f"person{i % 3}",
        "text": text or f"message number {i} about @sara and #deploys",
        "ts": T0 + timedelta(minutes=i),
        "provenance": Provenance.HUMAN,
        "ingested_at": T0 + timedelta(hours=1),
    }
    base.update(over)
    return Episode.model_validate(base)


def links(eps: list[Episode]) -> list:  # type: ignore[type-arg]
    ex = EntityExtractor(projects=["billing-api"])
    return [lk for e in eps for lk in ex.links(e)]


def test_ensure_schema_is_idempotent(graph_store: GraphStore) -> None:
    graph_store.ensure_schema()
    graph_store.ensure_schema()
    graph_store.ping()


def test_upsert_counts_created_and_is_idempotent(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(20)]
    assert graph_store.upsert_episodes(eps, links(eps)) == 20
    counts = graph_store.counts()
    assert counts.episodes == {"raw": 20}
    assert counts.entities == 3 + 1 + 1 + 1  # 3 authors, channel dev, @sara, #deploys
    rels = counts.relationships
    assert rels == 20 * 4
    assert graph_store.upsert_episodes(eps, links(eps)) == 0
    again = graph_store.counts()
    assert again.episodes == {"raw": 20} and again.relationships == rels and again.entities == counts.entities


def test_existing_upsert_does_not_overwrite(graph_store: GraphStore) -> None:
    graph_store.upsert_episodes([ep(1, status=EpisodeStatus.ABSORBED, schema_absorbed=1)], [])
    graph_store.upsert_episodes([ep(1)], [])
    stored = graph_store.stored_episodes(["ep-platform-1", "nope"])
    assert {i: s.status for i, s in stored.items()} == {"ep-platform-1": EpisodeStatus.ABSORBED}


def test_round_trip_of_every_field_and_awkward_text(graph_store: GraphStore) -> None:
    original = ep(
        5,
        text=NASTY,
        provenance=Provenance.AI_DRAFT,
        connector="slack",
        absorbed_at=T0 + timedelta(days=1),
        schema_absorbed=1,
        status=EpisodeStatus.ABSORBED,
        absorbed_by="pat-1",
        pinned=True,
    )
    graph_store.upsert_episodes([original], links([original]))
    (back,) = graph_store.get_episodes([original.id, "missing"])
    assert back == original


def test_stored_episodes_give_status_content_and_hash(graph_store: GraphStore) -> None:
    e = ep(1, text=NASTY, status=EpisodeStatus.ABSORBED)
    graph_store.upsert_episodes([e], links([e]))
    got = graph_store.stored_episodes([e.id, "nope"])
    assert list(got) == [e.id]
    assert (got[e.id].status, got[e.id].content_hash) == (EpisodeStatus.ABSORBED, e.content_hash())
    assert dict(got[e.id].fields) == e.content()


def test_live_ids_texts_and_teams(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(3)] + [ep(9, team="other")]
    eps.append(ep(3, status=EpisodeStatus.RETIRED))
    eps.append(ep(4, status=EpisodeStatus.PRUNED))
    eps.append(ep(6, status=EpisodeStatus.ABSORBED))
    graph_store.upsert_episodes(eps, [])
    assert graph_store.teams() == ["other", "platform"]
    live = {"ep-platform-0", "ep-platform-1", "ep-platform-2", "ep-platform-6"}
    assert graph_store.live_ids("platform", "episode") == live
    texts = graph_store.live_texts("platform", "episode", ["ep-platform-0", "ep-platform-3", "ep-other-9"])
    assert texts == {"ep-platform-0": "message number 0 about @sara and #deploys"}
    assert graph_store.live_ids("platform", "pattern") == set()


def test_big_batch_is_chunked(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(250)]  # batch_size is 7 for the real backends: 36 UNWIND writes
    assert graph_store.upsert_episodes(eps, []) == 250
    assert len(graph_store.stored_episodes([e.id for e in eps])) == 250
    assert len(graph_store.get_episodes([e.id for e in eps])) == 250


def test_delete_all(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(5)]
    graph_store.upsert_episodes(eps, links(eps))
    graph_store.delete_all()
    c = graph_store.counts()
    assert (c.episodes, c.entities, c.relationships) == ({}, 0, 0)


def test_neo4j_unreachable_is_a_store_error_not_a_hang() -> None:
    from taskzilla_sleep.stores.neo4j import open_neo4j

    store = open_neo4j("bolt://127.0.0.1:1", None, connect_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(StoreError, match="neo4j unreachable at bolt://127.0.0.1:1"):
        store.ping()
    store.close()
    assert time.monotonic() - started < 30
