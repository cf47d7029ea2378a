"""Chroma's dead weight: rebuild a team's collection when its deleted vectors outweigh its live ones.

HNSW keeps a deleted vector's slot (chroma-core/chroma#2594); prune and decay delete most episode
vectors of a busy team, and after a month queries are 1.4x slower than on a rebuilt collection
(BENCHMARKS.md). Called after a team's decay, the night's last delete: once a team a night, and a
rebuild resets the count, so a rerun of the night does not rebuild again.
"""

from __future__ import annotations

import time

import structlog

from taskzilla_sleep.stores.ports import VectorKind, VectorStore

log = structlog.get_logger(__name__)

KINDS: tuple[VectorKind, ...] = ("episodes", "patterns")


def heavy(live: int, deleted: int, ratio: float) -> bool:
    """Deleted slots above ``ratio`` of the live ones (an emptied collection with any: yes)."""
    return deleted > 0 and deleted > ratio * live


def rebuild_heavy(vectors: VectorStore, team: str, ratio: float | None) -> int:
    """Rebuild each collection of ``team`` over ``ratio``; returns how many were rebuilt."""
    if ratio is None:
        return 0
    rebuilt = 0
    for kind in KINDS:
        health = vectors.health(team, kind)
        if not heavy(health.live, health.deleted, ratio):
            continue
        t0 = time.perf_counter()
        done = vectors.rebuild(team, kind)
        if done is None:
            continue
        rebuilt += 1
        log.info(
            "collection_rebuilt",
            team=team,
            kind=kind,
            generation=done.generation,
            live=done.live,
            dead_slots_dropped=done.dropped_deleted,
            leftovers_dropped=len(done.discarded),
            duration_s=round(time.perf_counter() - t0, 3),
        )
    return rebuilt
