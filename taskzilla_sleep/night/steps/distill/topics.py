"""The topics distill offers a judge: what the window's messages are about, grouped permissively.

A topic holds messages about one subject over the distill window, whoever wrote them and in whatever
words, and nothing splits it by value, polarity or change cues: two values held one after the other
(a change) or by two camps at once (a disagreement) are the judge's to separate, and it can only do
that if it sees both. A topic need not be about one thing only: the judge separates the beliefs in
it. What matters is that the messages of one belief are shown together, and a paraphrase barely
resembles the rule it restates (MiniLM: a habit's messages land in 2-3 of a week's leader clusters).
So: a window that fits in ``distill.topic_max_messages`` is one topic; a bigger one is clustered (the
most similar topic's centroid, plus a bonus for a project, tool, tag or person it already names, at or
above ``distill.topic_threshold``), then the smallest topics join their most similar one while both fit,
and a topic still too big is cut by time into consecutive parts, never by a rule. Deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from taskzilla_sleep.core.models import Episode


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
    if len(ordered) < min_size:
        return []
    if len(ordered) <= max_size:
        return [[m.episode for m in ordered]]
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
    members, sums = _packed(members, sums[: len(members)], max_size)
    out: list[list[Episode]] = []
    for group in members:
        if len(group) >= min_size:
            out += _parts(sorted(group, key=lambda e: (e.ts, e.id)), max_size, min_size)
    return out


def _packed(
    members: list[list[Episode]], sums: npt.NDArray[np.float64], max_size: int
) -> tuple[list[list[Episode]], npt.NDArray[np.float64]]:
    """The smallest topic joins the most similar one (by centroid) it fits with, until none fits: a
    belief whose paraphrases the clustering scattered is shown whole as long as the topics allow."""
    groups = [list(g) for g in members]
    vec = [np.array(v) for v in sums]
    while True:
        order = sorted(range(len(groups)), key=lambda i: (len(groups[i]), i))
        for i in order:
            fits = [j for j in range(len(groups)) if j != i and len(groups[i]) + len(groups[j]) <= max_size]
            if not fits:
                continue
            centre = _unit(vec[i])
            j = max(fits, key=lambda k: (float(_unit(vec[k]) @ centre), -k))
            groups[j] += groups[i]
            vec[j] = vec[j] + vec[i]
            del groups[i], vec[i]
            break
        else:
            return groups, np.array(vec)


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
