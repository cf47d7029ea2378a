"""Similarity thresholds are written in the bundled MiniLM's scale; another embedder's cosines are not.

Every threshold below compares two embeddings by cosine. Their values (``default.yaml``, a config
file, ``--set``) are MiniLM's: measured on the hard-case corpus with it. An embedder whose cosines
sit elsewhere ships a *scale*: pairs (MiniLM value, its own value at the same quantile of real chat).
Two kinds of threshold, treated apart (``core.settings.on_scale``):

- what *finds* candidates (topics for the model, the messages a belief may cite, the pairs reflect
  compares, what prune keeps, recall's floor) is converted, so that the same candidates are found;
- what *guards* (absorbing a message, a catch-all's cohesion, a contradiction set whatever the model
  said, the offline grouping, a pinned fact's match) keeps its number. The multilingual embedder's
  cosines are lower than MiniLM's, so the same number is stricter there: a change of embedder never
  loosens a guard. (Converting the guards too was measured: the careless lazy model then absorbed
  45 non-belief messages on the translated weeks and the oracle got 3 false contradictions.)

The multilingual embedder's scale comes from ``ops/bench/multilingual_calibrate.py`` (Ubuntu IRC,
not the corpus) and is stored with its centre in ``data/multilingual-e5-small.json``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

# (section, field) of every setting that is a cosine similarity: those that find candidates (converted
# to the embedder's scale) and those that guard (kept).
FINDING: tuple[tuple[str, str], ...] = (
    ("prune", "match_threshold"),
    ("distill", "topic_threshold"),
    ("distill", "support_similarity"),
    ("reflect", "min_similarity"),
    ("recall", "min_similarity"),
)
GUARDS: tuple[tuple[str, str], ...] = (
    ("distill", "similarity_threshold"),
    ("distill", "match_threshold"),
    ("distill", "absorb_similarity"),
    ("distill", "min_cohesion"),
    ("reflect", "conflict_similarity"),
)
MULTILINGUAL_DATA = "data/multilingual-e5-small.json"


@functools.cache
def multilingual_calibration() -> dict[str, Any]:
    """The multilingual embedder's centre and scale (packaged data)."""
    text = resources.files("taskzilla_sleep").joinpath(MULTILINGUAL_DATA).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def convert(value: float, scale: Sequence[Sequence[float]]) -> float:
    """``value`` (MiniLM's scale) on the other embedder's scale: linear between the scale's points."""
    points = sorted((float(a), float(b)) for a, b in scale)
    if value <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if value <= x1:
            return round(y0 + (y1 - y0) * (value - x0) / (x1 - x0), 4) if x1 > x0 else y1
    return points[-1][1]


def scale_of(provider: str) -> Sequence[Sequence[float]] | None:
    """The scale of the embedder ``embeddings.provider`` names; None: MiniLM's own, or unknown (litellm)."""
    if provider == "multilingual":
        scale: Sequence[Sequence[float]] = multilingual_calibration()["scale"]
        return scale
    return None
