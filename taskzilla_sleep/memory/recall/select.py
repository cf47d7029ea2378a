"""Which candidates fill the k slots: pure decisions on plain data, no store.

Every item needs ``min_similarity`` (the setting ``recall.min_similarity``) to be returned: a belief
by its score, a message by its similarity. A belief's score is the best of its statement's closeness
to the question and its supporting messages' (the episode query's hits that are its evidence): a
belief is found through any message it holds, and ranks where that message would.

The ranking: pinned facts first; then beliefs and raw messages by closeness to the question (a
belief's closeness adds ``WORDS_WEIGHT`` times the share of the question's words its statement
holds: ``words.shared``), where a live belief (active, or the new side of an open update) gets
``BELIEF_MARGIN``: it comes before a raw message that is less than the margin closer. Messages of
the bot and messages that state a replaced value (evidence of a superseded belief or of the old
side of an open update) come after all the others: a reminder that lags a change, or the old
value, never stands before the belief.
Beliefs are chosen by score x confidence; raw episodes only when fewer than k beliefs answer well
(score >= GOOD_ENOUGH). De-duplication comes before every cut, so the k slots hold k distinct things:
a belief shown hides the episodes it was distilled from that rank below it (with its score, all of
those it was scored with), and items with the same text (spacing and case aside) collapse into the
best of them, which counts them in ``duplicates``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from taskzilla_sleep.core.settings.sections import RecallSettings
from taskzilla_sleep.memory.recall.item import RecallItem

MIN_SIMILARITY = RecallSettings().min_similarity  # the setting ``recall.min_similarity``'s default
# A live belief comes before a raw message less than this much closer to the question: a question
# asked in chat ("can i merge with 1 approval?") is nearly the question itself, and says less than the
# belief that answers it. Measured on the hard-case corpus: BENCHMARKS.md, *Recall answers with the belief*.
BELIEF_MARGIN = 0.15
GOOD_ENOUGH = 0.35  # with this many good beliefs, no raw episode is needed
# A belief ranks as if this much times the share of the question's words its statement holds
# (``words.shared``) were added to its closeness: the embedder reads English, the words any language.
# Measured on the hard-case corpus: BENCHMARKS.md, *Recall answers with the belief*.
WORDS_WEIGHT = 0.2

# (not a fact, ranked after the others, -closeness, an episode, id): smaller ranks first.
Key = tuple[bool, bool, float, bool, str]


def same_text(text: str) -> str:
    """What makes two texts "identical": whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def closeness(i: RecallItem) -> float:
    """What ranks an item: its similarity, and for a belief the words it shares with the question."""
    return (i.similarity or 0.0) + WORDS_WEIGHT * (i.shared_words or 0.0)


def belief_key(i: RecallItem) -> tuple[bool, float, str]:
    return (i.kind != "fact", -(closeness(i) * (i.confidence or 0.0)), i.id)


def final_key(i: RecallItem, lead: bool = False, after: bool = False) -> Key:
    """One ranking by closeness to the question: facts first; a live belief (``lead``) with
    BELIEF_MARGIN; a message of the bot or of a replaced value (``after``) after all the others."""
    close = closeness(i) + (BELIEF_MARGIN if lead else 0.0)
    return (i.kind != "fact", after, -round(close, 4), i.kind == "episode", i.id)


@dataclass(frozen=True)
class EpisodeCandidate:
    item: RecallItem
    absorbed_by: str | None = None
    after: bool = False  # the bot's message, or one stating a replaced value: ranked after the others

    def key(self) -> Key:
        return final_key(self.item, after=self.after)


@dataclass(frozen=True)
class Cover:
    """What a shown belief makes redundant: episodes absorbed by these patterns (the belief and the
    ones shown beside it), and these episode ids (their evidence)."""

    patterns: frozenset[str] = frozenset()
    episodes: frozenset[str] = frozenset()

    def hides(self, c: EpisodeCandidate) -> bool:
        return c.item.id in self.episodes or (c.absorbed_by is not None and c.absorbed_by in self.patterns)


def episode_key(episode_id: str, similarity: float) -> Key:
    """``final_key`` of an episode from its vector hit alone (its similarity as recall rounds it), at
    best: a message ranked after the others ranks lower still."""
    return (True, False, -round(similarity, 4), True, episode_id)


@dataclass(frozen=True)
class Shade:
    """What the chosen beliefs hide, each only below itself: an episode a belief covers that ranks
    below it."""

    ranked: tuple[tuple[Key, Cover], ...] = ()
    texts: frozenset[str] = frozenset()  # the beliefs' own texts: a message repeating one counts for it
    good: int = 0  # beliefs that answer well: the slots no raw message is needed for

    @staticmethod
    def of(beliefs: Sequence[RecallItem], covers: Mapping[str, Cover], lead: frozenset[str] = frozenset()) -> Shade:
        return Shade(
            tuple((final_key(b, b.id in lead), covers.get(b.id, Cover(frozenset({b.id})))) for b in beliefs),
            frozenset(same_text(b.text) for b in beliefs),
            sum(1 for b in beliefs if (b.similarity or 0.0) >= GOOD_ENOUGH),
        )

    def hides(self, c: EpisodeCandidate) -> bool:
        key = c.key()
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
    lead: frozenset[str] = frozenset(),
) -> list[RecallItem]:
    """The result from the chosen beliefs (at most k, distinct, best first; ``lead``: the live ones)
    and the episode candidates. A belief hides the episodes it covers that rank below it; if the
    belief loses its slot, so do they (they rank lower still), so hiding never costs an episode its
    slot."""
    shade = Shade.of(beliefs, covers, lead)
    if shade.good >= k:
        return list(beliefs[:k])
    kept = sorted((c for c in episodes if not shade.hides(c)), key=EpisodeCandidate.key)
    eps, extra = _collapse_episodes(kept, beliefs, k - shade.good)
    after = frozenset(c.item.id for c in kept if c.after)
    final = sorted([*beliefs, *eps], key=lambda i: final_key(i, i.id in lead, i.id in after))[:k]
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
