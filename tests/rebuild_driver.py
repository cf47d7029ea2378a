"""One process of the collection-rebuild crash test: runs the stages it is given, in order.

    python -m tests.rebuild_driver (--dir CHROMA_DIR | --server HOST:PORT) STAGE...

Stages: ``seed`` (2,500 vectors, 1,300 deleted: over the rebuild trigger), ``night`` (what a night
does for the team: reconcile's leftover drop, then the rebuild trigger after decay) and ``snapshot``
(prints one JSON line: every vector's id, text, metadata and embedding, the collections, a query).
``TASKZILLA_CRASH_AT`` arms a crash point (taskzilla_sleep/core/faults.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.memory.reconcile import REBUILD_GRACE_S
from taskzilla_sleep.memory.vector_upkeep import rebuild_heavy
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from taskzilla_sleep.stores.memory.vectors import HashEmbedder

TEAM = "alpha"
WORDS = ["deploy", "release", "database", "migration", "lunch", "pizza", "cat", "windowsill", "oncall", "pager"]


def text(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" item{i}"


def seed(store: ChromaVectorStore) -> None:
    ids = [f"e{i:04d}" for i in range(2500)]
    store.upsert(
        TEAM, "episodes", ids, [text(i) for i in range(2500)], [{"n": i, "even": i % 2 == 0} for i in range(2500)]
    )
    store.delete(TEAM, "episodes", ids[::2][:1250] + ids[1::2][:50])


def snapshot(store: ChromaVectorStore) -> dict[str, object]:
    ids = sorted(store.present(TEAM, "episodes"))
    vectors = store.embeddings(TEAM, "episodes", ids)
    # Texts and metadatas have no port method of their own: read them from the current collection.
    current = store._collection(store._current("tz_alpha_episodes"), create=False)
    got = current.get(ids=ids, include=["documents", "metadatas"]) if current is not None else None
    rows: dict[str, Any] = {}
    if got is not None:
        rows = dict(zip(got["ids"], zip(got["documents"] or [], got["metadatas"] or [], strict=True), strict=True))
    return {
        "vectors": {i: [*rows[i], [round(x, 6) for x in vectors[i]]] for i in ids},
        # Similarities, not ids: the hash embedder gives many texts the same vector (ties in any order).
        "top": [round(h.similarity, 4) for h in store.query(TEAM, "episodes", text(7), 5)],
        "collections": sorted(store._collection_names()),
        "teams": store.teams(),
        "health": store.health(TEAM, "episodes").__dict__,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir")
    where.add_argument("--server")
    ap.add_argument("stages", nargs="+", choices=["seed", "night", "snapshot"])
    a = ap.parse_args(argv)
    configure_logging(level="info", json=True)  # logs to stderr; stdout carries the snapshots
    if a.dir:
        from pathlib import Path

        store = ChromaVectorStore.embedded(Path(a.dir), HashEmbedder())
    else:
        host, port = a.server.rsplit(":", 1)
        store = ChromaVectorStore.server(host, int(port), HashEmbedder(), timeout_s=30.0)
    try:
        for stage in a.stages:
            if stage == "seed":
                seed(store)
            elif stage == "night":
                store.drop_leftovers(REBUILD_GRACE_S)
                rebuild_heavy(store, TEAM, 0.5)
            else:
                print(json.dumps(snapshot(store), sort_keys=True), flush=True)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
