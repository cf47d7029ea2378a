"""What Chroma's deleted vectors cost a query: a collection after a month vs the same live vectors rebuilt.

    python -m ops.bench.hnsw_deleted CHROMA_DIR [--collection tz_platform_episodes] [--queries 200]

CHROMA_DIR is a ``PersistentClient`` folder, e.g. ``.tmp/bench/work/synthetic-falkordb/data/chroma``
after ``make bench``. It is copied first (never written). Chroma's HNSW index marks deleted vectors
and keeps them in the graph (chroma-core/chroma#2594); prune and decay delete most episode vectors
of a busy team. The script rebuilds a collection from the live vectors and one of a day-1 size, then
times the same queries (the live vectors plus a little noise) on each, alternated in one process,
and prints p50/p95 and their ratios.

    python -m ops.bench.hnsw_deleted --simulate [--server] [--runs 3] [--quick]

simulates the month instead, through the product's own ``ChromaVectorStore`` (embedded, or a
``chroma run`` server with ``--server``): each day adds ``--per-day`` vectors, prunes the oldest so
``--live`` stay, and — with the rebuild on — runs the nightly trigger (``vector_upkeep``, ratio 0.5).
It times the same Chroma queries (their collection as the store resolves it) after day 1 and after
the last day, rebuild off and on, and prints the day-N ÷ day-1 p95 ratio of each run. The vectors are
clustered random unit vectors of MiniLM's 384 dimensions (no model: HNSW's cost is in the index).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import chromadb
import numpy as np


def _times(pairs: list[tuple[Any, list[float]]], queries: np.ndarray, rounds: int) -> None:
    for r in range(rounds):
        order = pairs if r % 2 == 0 else list(reversed(pairs))
        for q in queries:
            for col, acc in order:
                t0 = time.perf_counter()
                col.query(query_embeddings=[q.tolist()], n_results=15)
                acc.append((time.perf_counter() - t0) * 1000)


def _pct(x: list[float], p: float) -> float:
    return float(np.percentile(x, p))


class _Table:
    """An Embedder that looks a text ``v{i}`` up in a table of vectors (the bench's stand-in model)."""

    name = "bench-table-384"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    def embed(self, texts: Any) -> list[list[float]]:
        return [self.vectors[int(t[1:])].tolist() for t in texts]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _query_times(store: Any, queries: np.ndarray, rounds: int) -> list[float]:
    col = store._collection(store._current("tz_bench_episodes"), create=False)
    times: list[float] = []
    for _ in range(rounds):
        for q in queries:
            t0 = time.perf_counter()
            col.query(query_embeddings=q[np.newaxis, :], n_results=15)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def _month(open_store: Any, a: argparse.Namespace, rebuild: bool, rng: np.random.Generator) -> dict[str, float]:
    from taskzilla_sleep.memory.vector_upkeep import rebuild_heavy

    total = a.days * a.per_day
    centres = _unit(rng.normal(size=(64, 384)))
    vectors = _unit(centres[rng.integers(0, 64, total)] + rng.normal(0, 0.35, (total, 384)))
    store = open_store(_Table(vectors))
    store.delete_all()
    ids = [f"v{i}" for i in range(total)]
    live: list[str] = []
    out: dict[str, float] = {"rebuilds": 0}
    try:
        for day in range(a.days):
            new = ids[day * a.per_day : (day + 1) * a.per_day]
            for i in range(0, len(new), 1000):
                store.upsert(
                    "bench", "episodes", new[i : i + 1000], new[i : i + 1000], [{"d": day}] * len(new[i:][:1000])
                )
            live += new
            if len(live) > a.live:
                store.delete("bench", "episodes", live[: len(live) - a.live])
                live = live[len(live) - a.live :]
            if rebuild:
                out["rebuilds"] += rebuild_heavy(store, "bench", 0.5)
            if day in (0, a.days - 1):
                pick = rng.choice(len(live), a.queries)
                queries = _unit(vectors[[int(live[i][1:]) for i in pick]] + rng.normal(0, 0.02, (a.queries, 384)))
                _query_times(store, queries[:20], 1)  # warm up: load the index
                t = _query_times(store, queries, 3)
                key = "day1" if day == 0 else "last"
                out[f"{key}_p50"], out[f"{key}_p95"] = _pct(t, 50), _pct(t, 95)
        health = store.health("bench", "episodes")
        out["live"], out["dead"] = health.live, health.deleted
    finally:
        store.delete_all()
        store.close()
    return out


def simulate(a: argparse.Namespace) -> int:
    import contextlib

    from taskzilla_sleep.core.logs import configure_logging
    from taskzilla_sleep.stores.chroma import ChromaVectorStore

    configure_logging(level="warning")  # stderr; stdout is the table
    with tempfile.TemporaryDirectory(prefix="tz-hnsw-sim-") as tmp, contextlib.ExitStack() as stack:
        if a.server:
            from tests.chroma_service import chroma_server

            host, port = stack.enter_context(chroma_server(Path(tmp) / "server"))

            def open_store(embedder: Any) -> Any:
                return ChromaVectorStore.server(host, port, embedder, timeout_s=60.0)
        else:

            def open_store(embedder: Any) -> Any:
                return ChromaVectorStore.embedded(Path(tmp) / "embedded", embedder)

        where = "chroma-server" if a.server else "chroma-embedded"
        print(f"{where}: {a.days} days x {a.per_day} vectors, {a.live} kept live, {a.queries} queries x 3 rounds")
        for run in range(1, a.runs + 1):
            for rebuild in (False, True):
                r = _month(open_store, a, rebuild, np.random.default_rng(a.seed + run))
                print(
                    f"run {run} rebuild {'on ' if rebuild else 'off'}: day 1 p50/p95 {r['day1_p50']:.2f}/"
                    f"{r['day1_p95']:.2f} ms, day {a.days} {r['last_p50']:.2f}/{r['last_p95']:.2f} ms, "
                    f"p95 ratio {r['last_p95'] / r['day1_p95']:.2f} "
                    f"(rebuilds {int(r['rebuilds'])}, at the end {int(r['live'])} live, {int(r['dead'])} dead slots)",
                    flush=True,
                )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chroma_dir", type=Path, nargs="?")
    ap.add_argument("--simulate", action="store_true", help="simulate the month (see the docstring)")
    ap.add_argument("--server", action="store_true", help="--simulate against a chroma server")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=2000)
    ap.add_argument("--live", type=int, default=8600)
    ap.add_argument("--quick", action="store_true", help="--simulate at a quarter of the sizes")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--collection", default="tz_platform_episodes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--day1-size", type=int, default=1162)
    a = ap.parse_args(argv)
    if a.simulate:
        if a.quick:
            a.per_day, a.live = a.per_day // 4, a.live // 4
        return simulate(a)
    if a.chroma_dir is None:
        ap.error("CHROMA_DIR is required (or --simulate)")
    with tempfile.TemporaryDirectory(prefix="tz-hnsw-") as tmp:
        copy = Path(tmp) / "old"
        shutil.copytree(a.chroma_dir, copy)
        old = chromadb.PersistentClient(path=str(copy)).get_collection(a.collection)
        got = old.get(include=["embeddings"])
        ids = list(got["ids"])
        embs = np.asarray(got["embeddings"], dtype=np.float32)
        index_mb = sum(f.stat().st_size for d in copy.iterdir() if d.is_dir() for f in d.rglob("*")) / 1e6
        print(f"{a.collection}: {len(ids)} live vectors; HNSW folders on disk {index_mb:.1f} MB")
        new = chromadb.PersistentClient(path=str(Path(tmp) / "new"))
        rebuilt = new.get_or_create_collection("rebuilt", configuration={"hnsw": {"space": "cosine"}})
        for i in range(0, len(ids), 2000):
            rebuilt.add(ids=ids[i : i + 2000], embeddings=embs[i : i + 2000])
        rng = np.random.default_rng(7)
        small = new.get_or_create_collection("day1_sized", configuration={"hnsw": {"space": "cosine"}})
        sub = rng.choice(len(ids), min(a.day1_size, len(ids)), replace=False)
        small.add(ids=[ids[i] for i in sub], embeddings=embs[sub])
        picks = rng.choice(len(ids), min(a.queries, len(ids)), replace=False)
        queries = embs[picks] + rng.normal(0, 0.02, (len(picks), embs.shape[1])).astype(np.float32)
        cols: dict[str, tuple[Any, list[float]]] = {
            "after the month": (old, []),
            "rebuilt from its live vectors": (rebuilt, []),
            f"day-1 size ({len(sub)} live vectors)": (small, []),
        }
        _times([(c, []) for c, _ in cols.values()], queries[:20], 1)  # warm up: load each index
        _times(list(cols.values()), queries, 3)
        base = cols["rebuilt from its live vectors"][1]
        for name, (_, t) in cols.items():
            print(
                f"{name:40s} p50 {_pct(t, 50):6.2f} ms  p95 {_pct(t, 95):6.2f} ms  "
                f"(÷ rebuilt: {_pct(t, 50) / _pct(base, 50):.2f} / {_pct(t, 95) / _pct(base, 95):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
