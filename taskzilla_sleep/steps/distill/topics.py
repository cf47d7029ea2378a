"""The topics distill offers a judge: what the window's messages are about, clustered permissively.

A topic holds the messages about one subject over the distill window, whoever wrote them and in
whatever words: embedding similarity to the topic's centroid (plus a bonus for a project, tool, tag
or person the topic already names) at or above ``distill.topic_threshold``. Nothing splits it by
value, polarity or change cues: two values held one after the other (a change) or by two camps at
once (a disagreement) are the judge's to separate, and it can only do that if it sees both. A topic
bigger than ``distill.topic_max_messages`` is cut by time into consecutive parts of that size, never
by a rule. Leader clustering in time order: deterministic, O(n·t) for t topics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from taskzilla_sleep.models import Episode


@dataclass(frozen=True)
class Message:
    """A message offered to the topic clustering: the episode, its unit vector, the entities it names."""

    episode: Episode
    vector: npt.NDArray[np.float64]
    entities: frozenset[str]  # entity keys other than author and channel


def topics(
    messages: Sequence[Message], threshold: float, max_size: int, min_size: int, entity_bonus: float = 0.08
) -> list[list[Episode]]:
    """The topics of ``messages``, each in time order, each of at least ``min_size`` and at most
    ``max_size`` messages (a bigger one in consecutive parts by time; a part smaller than ``min_size``
    joins the one before it)."""
    ordered = sorted(messages, key=lambda m: (m.episode.ts, m.episode.id))
    if not ordered:
        return []
    dim = ordered[0].vector.shape[0]
    centroids = np.zeros((len(ordered), dim), dtype=np.float64)  # at most one topic per message
    sums = np.zeros((len(ordered), dim), dtype=np.float64)
    members: list[list[Episode]] = []
    names: list[set[str]] = []
    for m in ordered:
        v = _unit(m.vector)
        best, best_score = -1, -math.inf
        if members:
            sims = centroids[: len(members)] @ v
            for t in np.argsort(-sims, kind="stable")[:32]:
                score = float(sims[t]) + (entity_bonus if m.entities & names[int(t)] else 0.0)
                if score > best_score:
                    best, best_score = int(t), score
        if best >= 0 and best_score >= threshold:
            members[best].append(m.episode)
            names[best] |= m.entities
            sums[best] += v
            centroids[best] = _unit(sums[best])
        else:
            t = len(members)
            members.append([m.episode])
            names.append(set(m.entities))
            sums[t] = v
            centroids[t] = v
    out: list[list[Episode]] = []
    for group in members:
        if len(group) >= min_size:
            out += _parts(group, max_size, min_size)
    return out


def _parts(group: list[Episode], max_size: int, min_size: int) -> list[list[Episode]]:
    """A topic cut by time into parts of at most ``max_size`` (equal sizes, so no part is a scrap)."""
    if len(group) <= max_size:
        return [group]
    n = math.ceil(len(group) / max_size)
    size = math.ceil(len(group) / n)
    parts = [group[i : i + size] for i in range(0, len(group), size)]
    if len(parts) > 1 and len(parts[-1]) < min_size:
        parts[-2] += parts.pop()
    return parts


def _unit(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v
