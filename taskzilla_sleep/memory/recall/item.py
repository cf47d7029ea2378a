"""One thing recall hands back, with what a bot needs to cite it, filter it and judge it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from taskzilla_sleep.core.models import ContradictionKind, PatternStatus, Time

MAX_EVIDENCE_IDS = 20  # supporting episode ids carried per belief (the count says how many there are)

ItemKind = Literal["fact", "pattern", "episode"]
# An episode's Provenance value; "distilled" for a pattern; "pinned" for a fact.
ItemProvenance = Literal["human", "bot", "ai-draft", "import", "distilled", "pinned"]
# The pattern's or the episode's status (PatternStatus / EpisodeStatus values).
ItemStatus = Literal[
    "tentative", "active", "contested", "superseded", "retired", "quarantined", "raw", "absorbed", "pruned", "forgotten"
]


class ContradictionRef(BaseModel):
    """The open contradiction a belief is part of: a person has been asked to decide."""

    id: str
    kind: ContradictionKind


class RecallItem(BaseModel):
    # Every field is in a response (defaults too): a generated client types lists as lists, not optional.
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    kind: ItemKind
    id: str
    team: str
    text: str
    # Cosine of the item to the query; a belief's is the best of its statement's and its supporting
    # messages' (``matched_evidence``). None: the item is no hit of the query, shown only beside one
    # that is (the other side of its contradiction, or the belief it replaced).
    similarity: float | None
    matched_evidence: str | None = None  # a belief's message whose similarity it is (None: the statement's)
    # Beliefs: the share of the question's words its statement holds, rarer words (among the beliefs
    # read) weighing more; it ranks the belief higher by ``WORDS_WEIGHT`` times this (recall.select).
    shared_words: float | None = None
    confidence: float | None = None  # beliefs only (a pinned fact: 1.0)
    status: ItemStatus | None = None
    contradiction: ContradictionRef | None = None
    # The new belief of an open update: the team's practice since this date, awaiting confirmation ...
    changed_on: Time | None = None
    was: str | None = None  # ... and the belief it replaces
    author: str | None = None  # episodes: who wrote it
    channel: str | None = None  # episodes: where
    time: Time | None = None  # episode: its ts; pattern: last seen; fact: when pinned
    provenance: ItemProvenance
    pinned_by: str | None = None  # facts: who declared it
    evidence_count: int | None = None  # beliefs: the supporting episodes in the ledger
    evidence_ids: list[str] = Field(default_factory=list)  # beliefs: up to MAX_EVIDENCE_IDS of them
    duplicates: int = 1  # items with the same text collapsed into this one (itself included)
    superseded: bool = False  # a belief a person (or a merge) replaced, or an episode it absorbed
    draft: bool = False  # an ai-draft episode (only with include_drafts)

    def render(self) -> str:
        """The command line's text: scores named, never bare numbers side by side."""
        parts: list[str] = []
        if self.kind == "episode":
            parts.append("draft" if self.draft else "episode")
        elif self.kind == "fact":
            parts.append("fact, pinned" + (f" by {self.pinned_by}" if self.pinned_by else ""))
        else:
            parts.append(f"pattern {self.status}" if self.status else "pattern")
        if self.confidence is not None and self.kind == "pattern":
            parts.append(f"confidence {self.confidence:.2f}")
        parts.append("no query match" if self.similarity is None else f"similarity {self.similarity:.2f}")
        if self.matched_evidence is not None:
            parts[-1] += " through a supporting message"
        if self.kind == "pattern" and self.evidence_count is not None:
            parts.append(f"{self.evidence_count} episode{'' if self.evidence_count == 1 else 's'}")
        if self.kind == "episode":
            where = " ".join(x for x in (self.author, f"in #{self.channel}" if self.channel else None) if x)
            when = f"{self.time:%Y-%m-%d}" if self.time else None
            parts += [x for x in (where, when) if x]
        if self.duplicates > 1:
            parts.append(f"said {self.duplicates} times")
        if self.superseded:
            parts.append("SUPERSEDED")
        return f"[{', '.join(parts)}{self._flags()}] {self.text}"

    def _flags(self) -> str:
        cid = self.contradiction.id if self.contradiction else None
        if self.changed_on is not None:
            flags = f" CHANGED on {self.changed_on:%Y-%m-%d}, awaiting confirmation (was: {self.was})"
            return flags + (f", see {cid}" if cid else "")
        if self.contradiction is not None or self.status == PatternStatus.CONTESTED.value:
            return f" CONTESTED, see {cid}" if cid else " CONTESTED"
        return ""
