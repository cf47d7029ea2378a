"""What the bot gets back for a query: pinned facts first, then patterns, raw episodes only as fallback.

The bot's own drafts (``ai-draft`` episodes) are never memory: left out unless asked for, and then
labelled. Nor is a message the injection lint flags (an order to the assistant, a role marker, a
secret): it stays in the store, but the bot never gets it back. A contested belief is never shown
alone: the belief it contradicts comes right after it, both with the contradiction's id, so the bot
can say that the team has not settled it.
Every recall marks what it returned as accessed (prune reads that: a recalled episode is not stale).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from taskzilla_sleep.beliefs import injection
from taskzilla_sleep.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    ContradictionKind,
    PatternStatus,
    Provenance,
    normalize_name,
)
from taskzilla_sleep.quarantine import settle
from taskzilla_sleep.stores.ports import GraphStore, VectorStore

FACT_MIN_SIMILARITY = 0.2
PATTERN_MIN_SIMILARITY = 0.25
GOOD_ENOUGH = 0.35  # with this many good patterns, no raw episode is needed
_LOWEST_FLOOR = min(FACT_MIN_SIMILARITY, PATTERN_MIN_SIMILARITY)


class RecallItem(BaseModel):
    kind: Literal["fact", "pattern", "episode"]
    id: str
    team: str
    text: str
    similarity: float
    confidence: float | None = None
    status: str | None = None
    contested: bool = False
    evidence: int | None = None
    contradiction_id: str | None = None  # a contested or changed belief: the open contradiction it is part of
    draft: bool = False  # an ai-draft episode (only with include_drafts)
    # The new belief of an open update: the team's practice since this date, awaiting confirmation.
    changed_on: datetime | None = None
    was: str | None = None  # ... and the belief it replaces

    def render(self) -> str:
        if self.kind == "episode":
            return f"[{'draft' if self.draft else 'episode'} {self.similarity:.2f}] {self.text}"
        flags = ""
        if self.changed_on is not None:
            flags = f" CHANGED on {self.changed_on:%Y-%m-%d}, awaiting confirmation (was: {self.was})"
            flags += f", see {self.contradiction_id}" if self.contradiction_id else ""
        elif self.contested:
            flags = f" CONTESTED, see {self.contradiction_id}" if self.contradiction_id else " CONTESTED"
        label = (
            "fact, pinned" if self.kind == "fact" else f"{self.status} {self.confidence:.2f}, {self.evidence} episodes"
        )
        return f"[{label}{flags}] {self.text}"


def recall(
    graph: GraphStore,
    vectors: VectorStore,
    query: str,
    now: datetime,
    teams: Sequence[str] | None = None,
    entity: str | None = None,
    k: int = 5,
    include_drafts: bool = False,
) -> list[RecallItem]:
    ent = normalize_name(entity) if entity else None
    items: list[RecallItem] = []
    for team in teams if teams is not None else graph.teams():
        # Hits below every floor are never shown: not worth fetching their patterns from the graph.
        hits = [h for h in vectors.query(team, "patterns", query, n=k * 4) if h.similarity >= _LOWEST_FLOOR]
        pats = graph.pattern_cards([h.id for h in hits]) if hits else {}
        for h in hits:
            p = pats.get(h.id)
            if p is None or p.status not in PATTERN_LIVE:
                continue
            if ent and not (any(normalize_name(s) == ent for s in p.subjects) or ent in p.statement.casefold()):
                continue
            floor = FACT_MIN_SIMILARITY if p.pinned else PATTERN_MIN_SIMILARITY
            if h.similarity < floor:
                continue
            items.append(
                RecallItem(
                    kind="fact" if p.pinned else "pattern",
                    id=p.id,
                    team=team,
                    text=p.statement,
                    similarity=round(h.similarity, 4),
                    confidence=p.confidence,
                    status=p.status.value,
                    contested=p.status is PatternStatus.CONTESTED,
                    evidence=p.support_count,
                )
            )
    items.sort(key=lambda i: (i.kind != "fact", -(i.similarity * (i.confidence or 0.0)), i.id))
    items = items[:k]
    good = sum(1 for i in items if i.similarity >= GOOD_ENOUGH)
    if good < k:
        for team in teams if teams is not None else graph.teams():
            hits = vectors.query(team, "episodes", query, n=k * 3)
            eps = {e.id: e for e in graph.get_episodes([h.id for h in hits])}
            for h in hits:
                e = eps.get(h.id)
                if e is None or e.status not in EPISODE_LIVE:
                    continue
                draft = e.provenance is Provenance.AI_DRAFT
                if draft and not include_drafts:
                    continue  # the bot's own drafts are not the team's memory
                if injection(e.text) is not None:
                    continue  # chat is data: an order to the assistant, or a secret, is never handed to the bot
                if (
                    ent
                    and ent not in (normalize_name(e.author), normalize_name(e.channel))
                    and ent not in e.text.casefold()
                ):
                    continue
                items.append(
                    RecallItem(
                        kind="episode", id=e.id, team=team, text=e.text, similarity=round(h.similarity, 4), draft=draft
                    )
                )
        # One ranking by closeness to the question: a belief comes before a raw message as close, never
        # before one that answers it better ("when are timesheets due?" is not answered by a pattern
        # about pricing that clears the floor). Facts stay first. (A preference for patterns of 0.05,
        # 0.1 or 0.2 cosine measured worse on the hard-case corpus' recall questions: BENCHMARKS.md.)
        eps_part = sorted((i for i in items if i.kind == "episode"), key=lambda i: (-i.similarity, i.id))
        pats_part = [i for i in items if i.kind != "episode"]
        ranked = pats_part + eps_part[: max(0, k - good)]
        items = sorted(ranked, key=lambda i: (i.kind != "fact", -i.similarity, i.kind == "episode", i.id))[:k]
    items = _with_counterparts(graph, items)
    graph.mark_accessed([i.id for i in items if i.kind == "episode"], [i.id for i in items if i.kind != "episode"], now)
    settle(graph, vectors, now)  # what could not be read was left out above; set it aside for good
    return items


def _with_counterparts(graph: GraphStore, items: list[RecallItem]) -> list[RecallItem]:
    """Each belief of an open contradiction followed by the other one (fetched if the query did not
    find it), both with the contradiction's id; the new belief of an open update marked as a change
    awaiting confirmation, with the belief it replaces."""
    if not any(i.kind != "episode" for i in items):
        return items
    teams = sorted({i.team for i in items if i.kind != "episode"})
    open_ = [c for t in teams for c in graph.contradictions(t, "open")]
    other: dict[str, tuple[str, str]] = {}  # pattern id -> (the other belief, contradiction id)
    for c in open_:
        other.setdefault(c.old_pattern_id, (c.new_pattern_id, c.id))
        other.setdefault(c.new_pattern_id, (c.old_pattern_id, c.id))
    if not any(i.id in other for i in items):
        return items
    wanted = [other[i.id][0] for i in items if i.id in other]
    cards = graph.pattern_cards(wanted)
    out: list[RecallItem] = []
    for item in items:
        if any(o.id == item.id for o in out):
            continue  # already shown as the counterpart of an earlier one
        pair = other.get(item.id)
        out.append(item.model_copy(update={"contradiction_id": pair[1]}) if pair else item)
        if pair is None:
            continue
        mate = next((i for i in items if i.id == pair[0]), None)
        if mate is None and pair[0] in cards:
            p = cards[pair[0]]
            mate = RecallItem(
                kind="fact" if p.pinned else "pattern",
                id=p.id,
                team=item.team,
                text=p.statement,
                similarity=0.0,
                confidence=p.confidence,
                status=p.status.value,
                contested=p.status is PatternStatus.CONTESTED,
                evidence=p.support_count,
            )
        if mate is not None and not any(o.id == mate.id for o in out):
            out.append(mate.model_copy(update={"contradiction_id": pair[1]}))
    updates = {c.new_pattern_id: c for c in open_ if c.kind is ContradictionKind.UPDATE}
    shown = [i.id for i in out if i.id in updates]
    if not shown:
        return out
    sides = {p.id: p for p in graph.patterns_by_id(shown + [updates[i].old_pattern_id for i in shown])}

    def marked(i: RecallItem) -> RecallItem:
        c = updates.get(i.id)
        new, old = (sides.get(c.new_pattern_id), sides.get(c.old_pattern_id)) if c else (None, None)
        if new is None or old is None:
            return i
        return i.model_copy(update={"changed_on": new.first_seen, "was": old.statement})

    return [marked(i) for i in out]
