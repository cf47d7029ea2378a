"""What Chroma's deleted vectors cost a query: a collection after a month vs the same live vectors rebuilt.

    python -m ops.bench.hnsw_deleted CHROMA_DIR [--collection tz_platform_episodes] [--queries 200]

CHROMA_DIR is a ``PersistentClient`` folder, e.g. ``.tmp/bench/work/synthetic-falkordb/data/chroma``
after ``make bench``. It is copied first (never written). Chroma's HNSW index marks deleted vectors
and keeps them in the graph (chroma-core/chroma#2594); prune and decay delete most episode vectors
of a busy team. The script rebuilds a collection from the live vectors and one of a day-1 size, then
times the same queries (the live vectors plus a little noise) on each, alternated in one process,
and prints p50/p95 and their ratios.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chroma_dir", type=Path)
    ap.add_argument("--collection", default="tz_platform_episodes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--day1-size", type=int, default=1162)
    a = ap.parse_args(argv)
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
