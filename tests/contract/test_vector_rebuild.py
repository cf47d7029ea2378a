"""Rebuilding a collection from its live vectors (issue 15, part 3), on embedded Chroma and on a real
Chroma server: the contract, a reader that follows the switch, the leftovers, and SIGKILL at each
phase of a rebuild followed by a rerun, which must end where an uninterrupted rebuild ends. The
contract and the reader also run on the in-memory fake (its rebuild is one step: no leftovers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.memory.vector_upkeep import rebuild_heavy
from taskzilla_sleep.stores import chroma_generations as gens
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import Embedder, VectorStore

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "The production deploy failed because the database migration timed out.",
    "Release notes go in #releases before every deploy.",
    "Who wants to order pizza for lunch on Friday?",
    "The cat is sleeping on the warm windowsill.",
    "Anna is on call this week for the payments service.",
    "Rotate the staging TLS certificate before it expires on Monday.",
    "The flaky login test was quarantined until the fix lands.",
    "Use the blue-green switch for database upgrades.",
]

Opener = Callable[[], ChromaVectorStore]
AnyOpener = Callable[[], VectorStore]
CHROMA = ["chroma-embedded", pytest.param("chroma-server", marks=pytest.mark.chroma_server)]
EVERY_BACKEND = pytest.mark.parametrize("where", ["memory", *CHROMA], indirect=True)


@pytest.fixture(params=CHROMA)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``--dir PATH`` or ``--server HOST:PORT`` (the driver's flag); the server is emptied first.
    ``memory``: the in-memory fake (the tests marked EVERY_BACKEND only)."""
    if request.param == "memory":
        return "memory"
    if request.param == "chroma-embedded":
        return f"--dir={tmp_path / 'chroma'}"
    host, port = request.getfixturevalue("chroma_address")
    return f"--server={host}:{port}"


@pytest.fixture
def open_store(where: str, offline_embedder: Embedder) -> Iterator[AnyOpener]:
    """Opens a new store on the same data each call (a ChromaVectorStore unless ``where`` is memory)."""
    opened: list[VectorStore] = []
    fake = MemoryVectorStore(offline_embedder)  # where == "memory": every store opened shares its data

    def open_one() -> VectorStore:
        flag, _, value = where.partition("=")
        store: VectorStore
        if flag == "memory":
            store = MemoryVectorStore(offline_embedder, sharing=fake)
        elif flag == "--dir":
            store = ChromaVectorStore.embedded(Path(value), offline_embedder)
        else:
            host, port = value.rsplit(":", 1)
            store = ChromaVectorStore.server(host, int(port), offline_embedder, timeout_s=10.0)
        opened.append(store)
        return store

    open_one().delete_all()
    yield open_one
    opened[0].delete_all()
    for store in opened:
        store.close()


def _seed(store: VectorStore) -> list[str]:
    ids = [f"e{i}" for i in range(len(TEXTS))]
    store.upsert("alpha", "episodes", ids, TEXTS, [{"i": i, "team": "alpha"} for i in range(len(TEXTS))])
    store.upsert("alpha", "patterns", ["p1"], [TEXTS[1]], [{"kind": "pattern"}])
    return ids


@EVERY_BACKEND
def test_rebuild_keeps_every_live_vector_and_drops_the_dead_slots(open_store: AnyOpener) -> None:
    store = open_store()
    ids = _seed(store)
    store.delete("alpha", "episodes", [*ids[:5], "never-there"])
    assert store.health("alpha", "episodes").__dict__ == {"live": 3, "deleted": 5, "generation": 0}
    before_vectors = store.embeddings("alpha", "episodes", ids)
    before_hits = store.query("alpha", "episodes", "database upgrade", n=3)

    done = store.rebuild("alpha", "episodes")

    assert done is not None and (done.generation, done.live, done.dropped_deleted) == (1, 3, 5)
    assert store.health("alpha", "episodes").__dict__ == {"live": 3, "deleted": 0, "generation": 1}
    assert store.embeddings("alpha", "episodes", ids) == before_vectors  # copied, never re-embedded
    after_hits = store.query("alpha", "episodes", "database upgrade", n=3)
    assert [(h.id, h.text, h.metadata) for h in after_hits] == [(h.id, h.text, h.metadata) for h in before_hits]
    assert [h.similarity for h in after_hits] == pytest.approx([h.similarity for h in before_hits], abs=1e-6)
    assert store.teams() == ["alpha"] and store.count("alpha", "patterns") == 1
    assert store.counts() == {"alpha": {"episodes": 3, "patterns": 1}}  # the current generation only
    assert store.drop_leftovers(0.0) == []  # the old generation is gone
    # Writes after the switch land in the new generation, and its deletes are counted afresh.
    store.upsert("alpha", "episodes", ["e9"], [TEXTS[0]], [{"i": 9}])
    store.delete("alpha", "episodes", ["e7"])
    assert store.present("alpha", "episodes") == {"e5", "e6", "e9"}
    assert store.health("alpha", "episodes").__dict__ == {"live": 3, "deleted": 1, "generation": 1}
    again = store.rebuild("alpha", "episodes")
    assert again is not None and again.generation == 2
    assert store.present("alpha", "episodes") == {"e5", "e6", "e9"}
    assert store.rebuild("beta", "episodes") is None  # no collection, nothing to rebuild
    store.delete_all()
    assert store.teams() == [] and store.health("alpha", "episodes").generation == 0


@EVERY_BACKEND
def test_a_reader_opened_before_the_rebuild_follows_the_switch(open_store: AnyOpener) -> None:
    reader, night = open_store(), open_store()
    ids = _seed(night)
    night.delete("alpha", "episodes", ids[:6])
    hits = reader.query("alpha", "episodes", "who is on call", n=2)  # keeps the old collection's handle

    assert rebuild_heavy(night, "alpha", 0.5) == 1  # 6 dead > 0.5 x 2 live; patterns untouched
    assert night.health("alpha", "patterns").generation == 0

    assert [h.id for h in reader.query("alpha", "episodes", "who is on call", n=2)] == [h.id for h in hits]
    reader.upsert("alpha", "episodes", ["e10"], [TEXTS[4]], [{"i": 10}])
    assert night.present("alpha", "episodes") == {"e6", "e7", "e10"}
    assert rebuild_heavy(night, "alpha", 0.5) == 0  # below the ratio now


def test_what_another_process_writes_while_the_copy_runs_is_in_the_new_generation(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The API process pins, edits and forgets while the night copies: a new id, an id written over
    # in place (another text and metadata) and a deleted id all end in the new generation as written.
    night, api = open_store(), open_store()
    ids = _seed(night)
    night.delete("alpha", "episodes", ids[:5])
    api.query("alpha", "episodes", "who is on call", n=1)  # holds the old generation's handle
    real = gens.crashpoint

    def write_meanwhile(point: str) -> None:
        if point == "vectors.rebuild_before_switch":
            api.upsert("alpha", "episodes", ["e6", "e11"], [TEXTS[2], TEXTS[3]], [{"i": 66}, {"i": 11}])
            api.delete("alpha", "episodes", ["e7"])
        real(point)

    monkeypatch.setattr(gens, "crashpoint", write_meanwhile)
    done = night.rebuild("alpha", "episodes")

    assert done is not None and done.generation == 1
    assert night.present("alpha", "episodes") == {"e5", "e6", "e11"}
    [hit] = [h for h in night.query("alpha", "episodes", TEXTS[2], n=3) if h.id == "e6"]
    # (Chroma's upsert merges metadata: the keys not written again stay.)
    assert (hit.text, hit.metadata) == (TEXTS[2], {"i": 66, "team": "alpha"})
    assert hit.similarity == pytest.approx(1.0, abs=1e-3)
    fresh = open_store()  # what a process opened after the night sees
    assert fresh.embeddings("alpha", "episodes", ["e6"]) == night.embeddings("alpha", "episodes", ["e6"])
    assert fresh.embeddings("alpha", "episodes", ["e6"]) == api.embeddings("alpha", "episodes", ["e6"])


def test_reconcile_drops_a_superseded_generation_at_once_and_one_being_built_after_the_grace(
    open_store: Opener,
) -> None:
    store = open_store()
    _seed(store)
    store.delete("alpha", "episodes", ["e0"])
    store.rebuild("alpha", "episodes")  # current: generation 1
    client = store._client()
    client.create_collection("tz_alpha_episodes", embedding_function=None)  # as if the drop never ran
    client.create_collection("tz_alpha_episodes_g2", metadata={gens.BUILDING: time.time()}, embedding_function=None)

    checked = reconcile(MemoryGraphStore(), store, repair=False)  # reconcile --check: reported, kept
    assert checked.rebuild_leftovers == ["tz_alpha_episodes"]
    assert store.drop_leftovers(3600.0) == ["tz_alpha_episodes"]  # the one being built may be in flight
    assert store.drop_leftovers(0.0) == ["tz_alpha_episodes_g2"]
    assert sorted(store._collection_names()) == ["tz__generations", "tz_alpha_episodes_g1", "tz_alpha_patterns"]
    assert store.count("alpha", "episodes") == 7


# -- SIGKILL in the middle of a rebuild -----------------------------------------------------------

POINTS = ["vectors.rebuild_mid_copy", "vectors.rebuild_before_switch", "vectors.rebuild_after_switch"]


def _driver(where: str, *stages: str, crash: str | None = None) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "TASKZILLA_CRASH_AT"}
    env["PYTHONPATH"] = str(ROOT)
    if crash is not None:
        env["TASKZILLA_CRASH_AT"] = crash
    done = subprocess.run(
        [sys.executable, "-m", "tests.rebuild_driver", where, *stages],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if crash is not None:
        assert done.returncode == -9, f"{crash} not reached ({done.returncode}): {done.stderr[-2000:]}"
    else:
        assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_sigkill_at_each_phase_of_a_rebuild_then_the_next_night_equals_an_uninterrupted_rebuild(
    where: str, open_store: Opener, tmp_path: Path
) -> None:
    embedded = where.startswith("--dir")
    # Each backend kills at a point of its own (the store code is the same): mid-copy and after the
    # switch on embedded Chroma, a whole copy never switched to on the server.
    points = [POINTS[0], POINTS[2]] if embedded else [POINTS[1]]
    case = where if not embedded else f"--dir={tmp_path / 'base'}"
    before, expected = _driver(case, "seed", "snapshot", "night", "snapshot")
    assert expected["vectors"] == before["vectors"] and expected["top"] == before["top"]
    assert expected["health"] == {"live": 1200, "deleted": 0, "generation": 1}
    assert expected["collections"] == ["tz__generations", "tz_alpha_episodes_g1"]
    for point in points:
        if embedded:
            case = f"--dir={tmp_path / point}"  # a fresh directory per case
        else:
            open_store().delete_all()
        _driver(case, "seed", "night", crash=point)
        during, after = _driver(case, "snapshot", "night", "snapshot")
        # Killed: readers still see every live vector, whichever generation is current.
        assert during["vectors"] == before["vectors"] and during["top"] == before["top"], point
        assert after == expected, point
