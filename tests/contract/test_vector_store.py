"""One contract for every VectorStore backend: the same assertions on embedded Chroma, on a real
Chroma server (``chroma run``) and on the in-memory fake the unit tests use, all with the real
offline MiniLM embedder."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pytest

from taskzilla_sleep.core.errors import InputError, StoreError
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from taskzilla_sleep.stores.embeddings import OfflineMiniLM
from taskzilla_sleep.stores.memory import MemoryVectorStore
from taskzilla_sleep.stores.ports import Embedder, MetaValue, VectorStore
from tests import chroma_service
from tests.conftest import service_unavailable


class StoreFactory(Protocol):
    def __call__(self, using: Embedder | None = None) -> VectorStore: ...


@pytest.fixture(scope="module")
def embedder() -> OfflineMiniLM:
    return OfflineMiniLM()


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    try:
        server = chroma_service.chroma_server(tmp_path_factory.mktemp("chroma-server"))
        address = server.__enter__()
    except Exception as exc:  # whatever stops it from starting is the skip reason
        service_unavailable(f"Chroma server could not start: {exc}")
    try:
        yield address
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(
    params=["memory", "chroma-embedded", pytest.param("chroma-server", marks=pytest.mark.chroma_server)],
)
def open_store(request: pytest.FixtureRequest, tmp_path: Path, embedder: OfflineMiniLM) -> Iterator[StoreFactory]:
    """Opens a new store (a new client) on the same data each time it's called."""
    opened: list[VectorStore] = []
    connect: Callable[[Embedder], VectorStore]

    if request.param == "memory":
        data = MemoryVectorStore(embedder)  # the fake's "server": every store opened shares its data

        def connect(using: Embedder) -> VectorStore:
            return MemoryVectorStore(using, sharing=data)
    elif request.param == "chroma-embedded":

        def connect(using: Embedder) -> VectorStore:
            return ChromaVectorStore.embedded(tmp_path / "chroma", using)
    else:
        host, port = request.getfixturevalue("chroma_server")

        def connect(using: Embedder) -> VectorStore:
            return ChromaVectorStore.server(host, port, using, timeout_s=5.0)

    def open_one(using: Embedder | None = None) -> VectorStore:
        store = connect(using or embedder)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()
    if request.param == "chroma-server":
        # The server lives for the module: leave it empty for the next test.
        cleaner = connect(embedder)
        cleaner.delete_all()
        cleaner.close()


@pytest.fixture
def vector_store(open_store: StoreFactory) -> VectorStore:
    store = open_store()
    store.ping()
    return store


CAT = "The cat is sleeping on the warm windowsill."
DEPLOY = "The production deploy failed because the database migration timed out."
LUNCH = "Who wants to order pizza for lunch on Friday?"


def upsert_three(store: VectorStore, team: str = "alpha") -> None:
    store.upsert(
        team,
        "episodes",
        ["cat", "deploy", "lunch"],
        [CAT, DEPLOY, LUNCH],
        [{"topic": "pets"}, {"topic": "ops"}, {"topic": "food"}],
    )


def test_describe_names_the_backend(vector_store: VectorStore) -> None:
    assert vector_store.describe().startswith(vector_store.backend + " ")


def test_upsert_then_count(vector_store: VectorStore) -> None:
    assert vector_store.count("alpha", "episodes") == 0

    upsert_three(vector_store)

    assert vector_store.count("alpha", "episodes") == 3
    assert vector_store.count("alpha", "patterns") == 0


def test_upsert_is_idempotent_and_replaces(vector_store: VectorStore) -> None:
    vector_store.upsert("alpha", "episodes", ["e1"], [CAT], [{"v": 1}])
    vector_store.upsert("alpha", "episodes", ["e1"], [DEPLOY], [{"v": 2}])

    assert vector_store.count("alpha", "episodes") == 1
    [hit] = vector_store.query("alpha", "episodes", DEPLOY, n=5)
    assert (hit.id, hit.text, hit.metadata) == ("e1", DEPLOY, {"v": 2})
    assert hit.similarity == pytest.approx(1.0, abs=1e-3)


def test_a_query_without_payload_gives_ids_and_similarities_only(vector_store: VectorStore) -> None:
    upsert_three(vector_store)
    full = vector_store.query("alpha", "episodes", DEPLOY, n=3)
    bare = vector_store.query("alpha", "episodes", DEPLOY, n=3, payload=False)
    assert [(h.id, round(h.similarity, 5)) for h in bare] == [(h.id, round(h.similarity, 5)) for h in full]
    assert all(h.text == "" and h.metadata == {} for h in bare) and any(h.text for h in full)


def test_empty_upsert_is_a_no_op_and_mismatched_lengths_are_refused(vector_store: VectorStore) -> None:
    vector_store.upsert("alpha", "episodes", [], [], [])
    assert vector_store.count("alpha", "episodes") == 0
    assert vector_store.teams() == []  # nothing written, no collection made

    with pytest.raises(InputError):
        vector_store.upsert("alpha", "episodes", ["a", "b"], [CAT], [{}, {}])
    with pytest.raises(InputError):
        vector_store.upsert("alpha", "episodes", ["a", "a"], [CAT, CAT], [{}, {}])
    with pytest.raises(InputError):
        vector_store.count("not a team!", "episodes")


def test_present_with_and_without_ids(vector_store: VectorStore) -> None:
    assert vector_store.present("alpha", "episodes") == set()
    upsert_three(vector_store)

    assert vector_store.present("alpha", "episodes") == {"cat", "deploy", "lunch"}
    assert vector_store.present("alpha", "episodes", ["cat", "nope", "lunch"]) == {"cat", "lunch"}
    assert vector_store.present("alpha", "episodes", []) == set()
    assert vector_store.present("alpha", "patterns", ["cat"]) == set()


def test_present_pages_through_a_collection_bigger_than_one_batch(vector_store: VectorStore) -> None:
    # More than one upsert batch and one page of get(): both loops must run more than once.
    ids = [f"m{i:05d}" for i in range(2500)]
    texts = [f"message {i}" for i in range(2500)]
    vector_store.upsert("alpha", "episodes", ids, texts, [{"i": i} for i in range(2500)])

    assert vector_store.count("alpha", "episodes") == 2500
    assert vector_store.present("alpha", "episodes") == set(ids)
    assert vector_store.present("alpha", "episodes", ids[::7]) == set(ids[::7])


def test_embeddings_returns_the_stored_vectors(vector_store: VectorStore, embedder: OfflineMiniLM) -> None:
    upsert_three(vector_store)

    vectors = vector_store.embeddings("alpha", "episodes", ["deploy", "nope", "cat"])

    assert set(vectors) == {"deploy", "cat"}
    [expected] = embedder.embed([DEPLOY])
    stored = vectors["deploy"]
    assert len(stored) == len(expected)
    assert all(isinstance(x, float) for x in stored)
    assert sum(a * b for a, b in zip(stored, expected, strict=True)) == pytest.approx(1.0, abs=1e-4)
    assert vector_store.embeddings("alpha", "episodes", []) == {}
    assert vector_store.embeddings("alpha", "patterns", ["cat"]) == {}


def test_vectors_and_distances_are_chromas_float32_values_on_every_backend(vector_store: VectorStore) -> None:
    """A server sends float32 as short decimals; read as float64 they differ from the embedded
    client's values in the 9th digit, and a similarity at a threshold would decide differently."""
    upsert_three(vector_store)

    stored = vector_store.embeddings("alpha", "episodes", ["deploy", "cat"])
    distances = [1.0 - h.similarity for h in vector_store.query("alpha", "episodes", DEPLOY + " today", n=3)]

    values = [x for v in stored.values() for x in v] + distances
    assert [float(np.float32(x)) for x in values] == values


def test_delete_removes_and_ignores_unknown_ids(vector_store: VectorStore) -> None:
    upsert_three(vector_store)

    vector_store.delete("alpha", "episodes", ["deploy", "never-existed"])
    vector_store.delete("alpha", "episodes", [])
    vector_store.delete("alpha", "patterns", ["cat"])  # a collection that doesn't exist

    assert vector_store.present("alpha", "episodes") == {"cat", "lunch"}
    assert vector_store.count("alpha", "episodes") == 2


def test_query_orders_by_similarity(vector_store: VectorStore) -> None:
    upsert_three(vector_store)

    hits = vector_store.query("alpha", "episodes", "the deployment broke during the DB migration", n=3)

    assert [h.id for h in hits][0] == "deploy"
    assert len(hits) == 3
    similarities = [h.similarity for h in hits]
    assert similarities == sorted(similarities, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in similarities)
    assert similarities[0] > 0.5 > similarities[-1]


def test_query_of_a_stored_text_has_similarity_one_and_n_limits(vector_store: VectorStore) -> None:
    upsert_three(vector_store)

    hits = vector_store.query("alpha", "episodes", CAT, n=1)

    assert [h.id for h in hits] == ["cat"]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert vector_store.query("alpha", "episodes", CAT, n=10)[0].id == "cat"
    assert len(vector_store.query("alpha", "episodes", CAT, n=10)) == 3
    assert vector_store.query("alpha", "episodes", CAT, n=0) == []
    assert vector_store.query("alpha", "patterns", CAT, n=3) == []


def test_metadata_round_trips_with_types(vector_store: VectorStore) -> None:
    metadata: dict[str, MetaValue] = {"author": "dana", "day": 12, "confidence": 0.75, "retired": False}
    vector_store.upsert("alpha", "patterns", ["p1", "p2"], [CAT, LUNCH], [metadata, {}])

    hits = {h.id: h for h in vector_store.query("alpha", "patterns", CAT, n=2)}

    assert hits["p1"].metadata == metadata
    assert type(hits["p1"].metadata["day"]) is int
    assert type(hits["p1"].metadata["retired"]) is bool
    assert hits["p1"].text == CAT
    assert hits["p2"].metadata == {}


def test_teams_are_isolated(vector_store: VectorStore) -> None:
    upsert_three(vector_store, team="alpha")
    vector_store.upsert("beta-2", "episodes", ["cat"], ["A completely different cat."], [{"t": "b"}])

    assert vector_store.count("alpha", "episodes") == 3
    assert vector_store.count("beta-2", "episodes") == 1
    assert vector_store.present("beta-2", "episodes") == {"cat"}
    [hit] = vector_store.query("beta-2", "episodes", CAT, n=5)
    assert hit.metadata == {"t": "b"}

    vector_store.delete("beta-2", "episodes", ["cat"])
    assert vector_store.present("alpha", "episodes", ["cat"]) == {"cat"}


def test_teams_lists_teams_with_collections(vector_store: VectorStore) -> None:
    assert vector_store.teams() == []

    upsert_three(vector_store, team="alpha")
    vector_store.upsert("team_with_under_scores", "patterns", ["p"], [LUNCH], [{}])

    assert vector_store.teams() == ["alpha", "team_with_under_scores"]


def test_counts_gives_every_teams_vectors_in_one_pass(vector_store: VectorStore) -> None:
    assert vector_store.counts() == {}
    upsert_three(vector_store, team="alpha")
    vector_store.upsert("team_with_under_scores", "patterns", ["p"], [LUNCH], [{}])
    vector_store.delete("alpha", "episodes", ["cat"])

    assert vector_store.counts() == {
        "alpha": {"episodes": 2},
        "team_with_under_scores": {"patterns": 1},
    }
    assert vector_store.counts()["alpha"]["episodes"] == vector_store.count("alpha", "episodes")


def test_reads_do_not_create_collections(vector_store: VectorStore) -> None:
    vector_store.count("ghost", "episodes")
    vector_store.present("ghost", "patterns")
    vector_store.query("ghost", "episodes", CAT, n=3)

    assert vector_store.teams() == []


def test_delete_all_drops_every_team(vector_store: VectorStore) -> None:
    upsert_three(vector_store, team="alpha")
    upsert_three(vector_store, team="beta")

    vector_store.delete_all()

    assert vector_store.teams() == []
    assert vector_store.count("alpha", "episodes") == 0
    upsert_three(vector_store, team="alpha")  # usable again afterwards
    assert vector_store.count("alpha", "episodes") == 3


def test_a_new_client_on_the_same_data_finds_the_vectors(open_store: StoreFactory) -> None:
    first = open_store()
    upsert_three(first)
    first.close()

    reopened = open_store()

    assert reopened.count("alpha", "episodes") == 3
    assert reopened.teams() == ["alpha"]
    assert reopened.query("alpha", "episodes", CAT, n=1)[0].id == "cat"
    reopened.upsert("alpha", "episodes", ["more"], ["another message"], [{}])
    assert reopened.count("alpha", "episodes") == 4


def test_a_query_asked_of_two_collections_is_embedded_once(open_store: StoreFactory, embedder: OfflineMiniLM) -> None:
    counting = _CountingEmbedder(embedder)
    store = open_store(counting)
    upsert_three(store)
    store.upsert("alpha", "patterns", ["p"], ["Never deploy on a Friday."], [{}])
    before = counting.texts

    eps = store.query("alpha", "episodes", DEPLOY, n=3)
    pats = store.query("alpha", "patterns", DEPLOY, n=3)

    assert counting.texts - before == 1
    assert eps[0].id == "deploy" and eps[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert [h.id for h in pats] == ["p"]


def test_a_collection_dropped_and_rebuilt_behind_the_stores_back(open_store: StoreFactory) -> None:
    store = open_store()
    upsert_three(store)
    assert store.query("alpha", "episodes", CAT, n=1)[0].id == "cat"  # the handle is kept now

    other = open_store()  # another process: drops everything, then writes again
    other.delete_all()
    other.upsert("alpha", "episodes", ["lunch"], [LUNCH], [{}])

    assert [h.id for h in store.query("alpha", "episodes", CAT, n=3)] == ["lunch"]
    other.delete_all()
    assert store.query("alpha", "episodes", CAT, n=3) == []


class _CountingEmbedder:
    def __init__(self, inner: OfflineMiniLM) -> None:
        self.name = inner.name
        self._inner = inner
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self._inner.embed(texts)


def test_a_closed_store_refuses_work(open_store: StoreFactory) -> None:
    store = open_store()
    store.ping()
    store.close()

    with pytest.raises(StoreError, match="closed"):
        store.count("alpha", "episodes")


class _DerivedEmbedder:
    """Another real embedder (MiniLM's vectors, reversed): a different vector space, same size."""

    def __init__(self, name: str, inner: Embedder) -> None:
        self.name = name
        self._inner = inner

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(reversed(v)) for v in self._inner.embed(texts)]


def test_a_collection_is_not_reopened_with_another_embedder(open_store: StoreFactory, embedder: OfflineMiniLM) -> None:
    model_a = _DerivedEmbedder("model-a", embedder)
    open_store(model_a).upsert("alpha", "episodes", ["cat"], [CAT], [{}])

    # Same Chroma function class (the adapter), another model: our own check refuses.
    with pytest.raises(StoreError, match="holds vectors of 'model-a'"):
        open_store(_DerivedEmbedder("model-b", embedder)).count("alpha", "episodes")
    # Another function class altogether: Chroma's check refuses, converted to StoreError.
    with pytest.raises(StoreError, match="tz_alpha_episodes"):
        open_store(embedder).query("alpha", "episodes", CAT, n=1)
    assert open_store(model_a).query("alpha", "episodes", CAT, n=1)[0].id == "cat"


def test_server_on_a_closed_port_raises_store_error_quickly(embedder: OfflineMiniLM) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    started = time.monotonic()

    store = ChromaVectorStore.server("127.0.0.1", closed_port, embedder, timeout_s=2.0)
    with pytest.raises(StoreError, match="chroma-server"):
        store.ping()
    with pytest.raises(StoreError):
        store.count("alpha", "episodes")

    assert time.monotonic() - started < 10.0
    store.close()


def test_server_that_never_answers_times_out(embedder: OfflineMiniLM) -> None:
    # A socket that accepts connections but never replies: the client must give up, not hang.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        store = ChromaVectorStore.server("127.0.0.1", port, embedder, timeout_s=1.0)
        started = time.monotonic()

        with pytest.raises(StoreError, match="heartbeat"):
            store.ping()

        assert time.monotonic() - started < 5.0
        store.close()
