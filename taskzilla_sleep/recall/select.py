"""Which candidates fill the k slots: pure decisions on plain data, no store.

The ranking: pinned facts first, then beliefs by similarity x confidence; raw episodes only when
fewer than k beliefs answer well (similarity >= GOOD_ENOUGH), then one ranking by closeness to the
question. De-duplication comes before every cut, so the k slots hold k distinct things: a belief
shown hides the episodes it was distilled from that rank below it, and items with the same text
(spacing and case aside) collapse into the best of them, which counts them in ``duplicates``.

A message the question finds closer than the belief it supports is not hidden: a belief is a
summary, and the message may hold what was asked (the change a newer message announced, the
number a statement left out). Hiding such messages put a less fitting belief first on the
hard-case corpus' recall questions (first-result accuracy 0.68 -> 0.57, offline provider).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from taskzilla_sleep.recall.item import RecallItem

FACT_MIN_SIMILARITY = 0.2
PATTERN_MIN_SIMILARITY = 0.25
GOOD_ENOUGH = 0.35  # with this many good patterns, no raw episode is needed
LOWEST_FLOOR = min(FACT_MIN_SIMILARITY, PATTERN_MIN_SIMILARITY)


def same_text(text: str) -> str:
    """What makes two texts "identical": whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def belief_key(i: RecallItem) -> tuple[bool, float, str]:
    return (i.kind != "fact", -((i.similarity or 0.0) * (i.confidence or 0.0)), i.id)


def final_key(i: RecallItem) -> tuple[bool, float, bool, str]:
    # One ranking by closeness to the question: a belief comes before a raw message as close, never
    # before one that answers it better ("when are timesheets due?" is not answered by a pattern
    # about pricing that clears the floor). Facts stay first. (A preference for patterns of 0.05,
    # 0.1 or 0.2 cosine measured worse on the hard-case corpus' recall questions: BENCHMARKS.md.)
    return (i.kind != "fact", -(i.similarity or 0.0), i.kind == "episode", i.id)


@dataclass(frozen=True)
class EpisodeCandidate:
    item: RecallItem
    absorbed_by: str | None = None


@dataclass(frozen=True)
class Cover:
    """What a shown belief makes redundant: episodes absorbed by these patterns (the belief and the
    ones shown beside it), and these episode ids (their evidence)."""

    patterns: frozenset[str] = frozenset()
    episodes: frozenset[str] = frozenset()

    def hides(self, c: EpisodeCandidate) -> bool:
        return c.item.id in self.episodes or (c.absorbed_by is not None and c.absorbed_by in self.patterns)


def episode_key(episode_id: str, similarity: float) -> tuple[bool, float, bool, str]:
    """``final_key`` of an episode from its vector hit alone (its similarity as recall rounds it)."""
    return (True, -round(similarity, 4), True, episode_id)


@dataclass(frozen=True)
class Shade:
    """What the chosen beliefs hide, each only below itself: an episode a belief covers that ranks
    below it (it may hold more than the summary when the question finds it closer)."""

    ranked: tuple[tuple[tuple[bool, float, bool, str], Cover], ...] = ()
    texts: frozenset[str] = frozenset()  # the beliefs' own texts: a message repeating one counts for it
    good: int = 0  # beliefs that answer well: the slots no raw message is needed for

    @staticmethod
    def of(beliefs: Sequence[RecallItem], covers: Mapping[str, Cover]) -> Shade:
        return Shade(
            tuple((final_key(b), covers.get(b.id, Cover(frozenset({b.id})))) for b in beliefs),
            frozenset(same_text(b.text) for b in beliefs),
            sum(1 for b in beliefs if (b.similarity or 0.0) >= GOOD_ENOUGH),
        )

    def hides(self, c: EpisodeCandidate) -> bool:
        key = final_key(c.item)
        return any(v.hides(c) and key > at for at, v in self.ranked)

    def hides_unread(self, episode_id: str, similarity: float) -> bool:
        """Hidden whatever the episode holds: it is a shown belief's evidence and ranks below it (a
        hit recall need not read from the graph)."""
        key = episode_key(episode_id, similarity)
        return any(episode_id in v.episodes and key > at for at, v in self.ranked)


@dataclass
class _Collapsed:
    items: list[RecallItem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # item id -> identical texts collapsed into it


def collapse_beliefs(ranked: Iterable[RecallItem], k: int) -> list[RecallItem]:
    """The first k distinct beliefs of ``ranked`` (best first), each counting the identical ones
    anywhere in ``ranked``."""
    out = _Collapsed()
    first: dict[str, str] = {}
    for item in ranked:
        key = same_text(item.text)
        if key in first:
            out.counts[first[key]] = out.counts.get(first[key], 1) + item.duplicates
            continue
        first[key] = item.id
        out.counts[item.id] = item.duplicates
        out.items.append(item)
    return [i.model_copy(update={"duplicates": out.counts[i.id]}) for i in out.items[:k]]


def pick(
    beliefs: Sequence[RecallItem],
    episodes: Sequence[EpisodeCandidate],
    k: int,
    covers: Mapping[str, Cover],
) -> list[RecallItem]:
    """The result from the chosen beliefs (at most k, distinct, best first) and the episode
    candidates (best first). A belief hides the episodes it covers that rank below it; if the belief
    loses its slot, so do they (they rank lower still), so hiding never costs an episode its slot."""
    shade = Shade.of(beliefs, covers)
    if shade.good >= k:
        return list(beliefs[:k])
    kept = [c for c in episodes if not shade.hides(c)]
    eps, extra = _collapse_episodes(kept, beliefs, k - shade.good)
    final = sorted([*beliefs, *eps], key=final_key)[:k]
    return [i.model_copy(update={"duplicates": i.duplicates + extra.get(i.id, 0)}) for i in final]


def _collapse_episodes(
    candidates: Sequence[EpisodeCandidate], shown: Sequence[RecallItem], limit: int
) -> tuple[list[RecallItem], dict[str, int]]:
    """Up to ``limit`` episodes whose text no shown belief nor better episode has, and for each
    item the identical episodes collapsed into it."""
    owner = {same_text(b.text): b.id for b in shown}
    extra: dict[str, int] = {}
    out: list[RecallItem] = []
    for c in candidates:
        key = same_text(c.item.text)
        if key in owner:
            extra[owner[key]] = extra.get(owner[key], 0) + c.item.duplicates
            continue
        owner[key] = c.item.id
        out.append(c.item)
    return out[: max(0, limit)], extra
