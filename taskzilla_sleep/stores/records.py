"""The values that cross the store interface (``ports.py``): what the domain hands a store and gets back.

Plain, frozen data: records of what the graph holds, the changes a step asks for, and the literal
names both sides agree on. ``ports.py`` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from taskzilla_sleep.core.models import EntityLink, Episode, EpisodeStatus, PatternStatus, Provenance, Time

ItemKind = Literal["episode", "pattern"]
GraphBackend = Literal["falkordb", "neo4j"]
PoisonKind = Literal["episode", "pattern", "contradiction"]
LinkRelation = Literal["refines", "compatible"]
# resolution: the answer to a delivered contradiction alert once a person resolved it
AlertKind = Literal["contradiction", "summary", "resolution"]
# dropped: never sent, and never will be (its contradiction was resolved before delivery; see dropped_reason)
AlertStatus = Literal["pending", "delivered", "failed", "dropped"]
VectorKind = Literal["episodes", "patterns"]
VectorBackend = Literal["chroma-embedded", "chroma-server"]
MetaValue = str | int | float | bool


@dataclass(frozen=True)
class StoredEpisode:
    """What the graph holds of an episode id, to tell a re-delivery from a reused id."""

    status: EpisodeStatus
    content_hash: str | None  # None: stored before hashes were kept
    fields: Mapping[str, object]  # CONTENT_FIELDS still on the node (text is None once retired/pruned)
    edited_at_ms: int | None = None  # the edit the stored text is (None: as first sent)
    edit_pending: bool = False  # an edit's graph write committed; its follow-up (re-score, re-embed) may not have


@dataclass(frozen=True)
class EpisodeEdit:
    """A later version of a stored episode's text (``edit_episodes``), with the entities it mentions."""

    id: str
    team: str
    text: str
    edited_at: datetime
    content_hash: str
    links: tuple[EntityLink, ...]
    injection: bool  # the injection lint's flag of the new text (``rules.beliefs.flagged``), kept with it
    injection_lint: str  # the version of the lint that computed it


@dataclass(frozen=True)
class EpisodeFlag:
    """The injection flag of a stored episode's text (``flag_episodes``): written only while the
    episode still holds exactly ``text`` (an edit since carries its own)."""

    id: str
    text: str
    injection: bool
    injection_lint: str


@dataclass(frozen=True)
class Poisoned:
    """A stored item whose properties could not be turned into its model: it is quarantined, not read."""

    kind: PoisonKind
    id: str
    team: str | None
    reason: str


@dataclass(frozen=True)
class Mention:
    """An entity an episode links, and in which role (author, channel, mention, tag, project, tool)."""

    key: str
    kind: str
    name: str
    role: str


@dataclass(frozen=True)
class PatternCard:
    """A pattern as recall shows it (not its evidence list, which grows with every night)."""

    id: str
    statement: str
    status: PatternStatus
    pinned: bool
    subjects: tuple[str, ...]
    confidence: float
    support_count: int


@dataclass(frozen=True)
class EpisodeCard:
    """A live episode as recall shows it (raw or absorbed; not the nights' bookkeeping)."""

    id: str
    team: str
    channel: str
    author: str
    text: str
    ts: datetime
    provenance: Provenance
    status: EpisodeStatus
    absorbed_by: str | None
    injection: bool | None  # the flag kept at ingest (None: stored before flags were kept)
    injection_lint: str | None  # the version of the lint that computed it
    # Of the ids asked about with it (``episode_cards``' ``same``) that would be cards themselves:
    # the owner (absorbed_by) of each holding exactly its text, and (id, text, owner) of the others.
    repeats: tuple[str | None, ...] = ()
    others: tuple[tuple[str, str, str | None], ...] = ()


@dataclass(frozen=True)
class PatternLink:
    """A relationship between two patterns: REFINES, COMPATIBLE_WITH, UNRELATED_TO (with the prompt
    that decided it), MERGED_INTO or SUPERSEDES."""

    a: str
    relation: str
    b: str
    prompt: str | None = None


@dataclass(frozen=True)
class Retirement:
    """An episode leaving the live store: its text dropped, a tombstone (id, time, reason) kept."""

    id: str
    status: Literal[EpisodeStatus.RETIRED, EpisodeStatus.PRUNED]
    at: Time
    reason: str
    pattern_id: str | None = None  # decay: the pattern it fed


@dataclass(frozen=True)
class Forgetting:
    """An episode a person asked to forget: its text, mentions and evidence links dropped, a tombstone
    naming who asked and why (never the text)."""

    id: str
    at: Time
    by: str
    reason: str


@dataclass(frozen=True)
class EpisodeRecord:
    """An episode exactly as the graph holds it, for export and import: the model (text empty once
    dropped), the content hash kept at ingest, and the entities it mentions."""

    episode: Episode
    content_hash: str | None
    mentions: tuple[Mention, ...]


@dataclass(frozen=True)
class PatternEdges:
    """What a pattern points at besides other patterns: the entities it is ABOUT (by key) and the
    episodes it is EVIDENCED_BY (which can differ from ``evidence_ids`` after a merge)."""

    about: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


class ItemUpdate(BaseModel):
    """Only the fields given are written (``model_fields_set``); a field given as None is cleared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str

    def changes(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in sorted(self.model_fields_set) if k != "id"}


class EpisodeUpdate(ItemUpdate):
    """Changes to one stored episode (absorption, the night's marks, a merge re-pointing it)."""

    status: EpisodeStatus | None = None
    schema_absorbed: int | None = None
    absorbed_at: Time | None = None
    absorbed_by: str | None = None
    distilled_at: Time | None = None
    distill_attempts: int | None = None
    distill_night: str | None = None
    declined_size: int | None = None
    edit_pending: None = None  # given (as None): an edit's follow-up is done, the mark is cleared


class PatternUpdate(ItemUpdate):
    """Changes to one stored pattern (a resolution, an unpin, reflect's retry bookkeeping)."""

    status: PatternStatus | None = None
    updated_at: Time | None = None
    reflect_attempts: int | None = None
    archived_by: str | None = None
    archived_at: Time | None = None
    archived_reason: str | None = None
    valid_to: Time | None = None


class GraphCounts(BaseModel):
    """Sizes of the graph by label and status (for ``status`` and the report); of one team, entities
    and relationships are None (counted for the whole store only)."""

    episodes: dict[str, int] = Field(default_factory=dict)
    patterns: dict[str, int] = Field(default_factory=dict)
    contradictions: dict[str, int] = Field(default_factory=dict)
    entities: int | None = 0
    tombstones: int = 0
    relationships: int | None = 0
    # The archive (what undo and release give back): before-images, retired messages' texts, bytes.
    archived_items: int = 0
    archived_texts: int = 0
    archived_bytes: int = 0

    def sizes(self) -> dict[str, int]:
        """The store sizes ops watch grow (ledger, report, metrics): linear in patterns, not in messages."""
        sizes = {
            "episodes_total": sum(self.episodes.values()),
            "episodes_live": self.episodes.get("raw", 0) + self.episodes.get("absorbed", 0),
            "patterns_live": sum(v for k, v in self.patterns.items() if k in ("tentative", "active", "contested")),
            "patterns_total": sum(self.patterns.values()),
            "contradictions_open": self.contradictions.get("open", 0),
            "entities": self.entities,
            "tombstones": self.tombstones,
            "relationships": self.relationships,
            "quarantined": sum(c.get("quarantined", 0) for c in (self.episodes, self.patterns, self.contradictions)),
            "archived_items": self.archived_items,
            "archived_texts": self.archived_texts,
            "archived_bytes": self.archived_bytes,
        }
        return {k: v for k, v in sizes.items() if v is not None}


@dataclass(frozen=True)
class TeamCounts:
    """One team's figures a /metrics scrape reads live (``GraphStore.team_counts``)."""

    patterns_live: int = 0  # tentative, active, contested
    contradictions_open: int = 0


@dataclass(frozen=True)
class LeaseClaim:
    """Who asks for a lease: the holder id ops read, and where it runs (to see a dead local holder)."""

    holder: str
    host: str
    pid_ns: str | None
    pid: int


@dataclass(frozen=True)
class LeaseState:
    holder: str | None
    expires_at_ms: int  # wall clock: a lease is about process liveness, not the night replayed
    host: str | None = None
    pid_ns: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class SessionRecord:
    """A console session as the graph keeps it (shared by replicas): never the cookie's value itself,
    only its SHA-256 (``key``); the caller's name, teams ("*": every team) and role at login."""

    key: str
    name: str
    teams: str  # comma-separated team names, or "*"
    role: str
    csrf: str
    created_ms: int  # wall clock
    last_seen_ms: int
    notices: tuple[str, ...] = ()  # one-shot messages for the next page, oldest first


# An ingest's mark is dropped an hour after it ended or expired: a reconcile needs it only while it
# compares a team's two stores, seconds after reading them.
MARK_KEPT_MS = 3_600_000


@dataclass(frozen=True)
class IngestMark:
    """An ingest in flight, announced in the graph: any process's reconcile tells the episodes it is
    still embedding (stored with its id) from drift. Wall-clock times, as a lease's: renewed while it
    runs, ``expires_at_ms`` set to its end when it ends (``ended``)."""

    id: str
    holder: str  # who runs it, as ops read a lease holder: ingest@HOST:PID:NONCE, worker@…
    host: str
    pid_ns: str | None
    pid: int
    teams: tuple[str, ...]
    started_at_ms: int
    expires_at_ms: int
    ended: bool = False


class AlertRecord(BaseModel):
    """One queued chat message for one channel, as the outbox stores it. Never deleted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # the idempotency key: "{contradiction_id}:{channel}" / "{summary_key}:{channel}"
    channel: str
    channel_kind: str
    kind: AlertKind
    team: str | None = None
    contradiction_id: str | None = None
    payload_json: str  # the message, rendered once at queueing: every retry sends the same
    status: AlertStatus = "pending"
    attempts: int = 0
    next_attempt_at: Time
    last_error: str | None = None
    created_at: Time
    last_attempt_at: Time | None = None
    delivered_at: Time | None = None
    dropped_reason: str | None = None  # why a ``dropped`` alert was not sent
    # The channel's id of the posted message (a Telegram message_id), so a later answer can reply to it.
    message_ref: str | None = None


# -- the archive: what a change (a night's run, a person's resolve or release) found before it wrote --

# The labels a change writes, whose state before it the archive keeps.
ArchivedLabel = Literal["Episode", "Pattern", "Contradiction", "Tombstone", "Entity", "Meta"]
ChangeKind = Literal["run", "resolve", "release"]
# The relationships an item owns (outgoing): its image keeps them and an undo puts them back.
OWNED_EDGES: Mapping[str, tuple[str, ...]] = {
    "Pattern": ("ABOUT", "EVIDENCED_BY", "MERGED_INTO", "REFINES", "COMPATIBLE_WITH", "UNRELATED_TO", "SUPERSEDES"),
    "Contradiction": ("OLD_BELIEF", "NEW_BELIEF"),
}


@dataclass(frozen=True)
class ItemRef:
    """An item a write is about to change: a node by label and id (``key`` for entities and meta).
    ``text``: the write drops an episode's text (retire, prune), so its image keeps the text."""

    label: ArchivedLabel
    key: str
    text: bool = False


class ChangeRecord(BaseModel):
    """One change whose before-images the archive holds: a run (the run's id) or a person's decision."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: ChangeKind
    at: Time  # the change's decision clock (a replayed night's --now): the archive's age counts from it
    recorded_at: Time  # the wall clock when it first archived something
    seq: int  # the wall clock in ns at the same moment: "later" means a greater (seq, id)
    by: str  # who made it: "night" for a run, the person for a decision
    teams: tuple[str, ...] = ()
    undone_at: Time | None = None
    undone_by: str | None = None
    undo_reason: str | None = None
    purged_at: Time | None = None  # its images are gone (decay.archive_days): it can no longer be undone


class ArchivedItem(BaseModel):
    """One item as it was before a change first wrote it. ``props``: its properties as JSON (an
    episode's text apart, in ``text``, kept only when the change dropped it); ``edges``: the
    relationships it owned, ``[[type, target id or key, prompt], ...]``; ``existed`` False: the change
    created it, and an undo deletes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    change: str
    team: str
    label: ArchivedLabel
    key: str
    existed: bool
    props: str = "{}"
    edges: str = "[]"
    text: str | None = None

    @property
    def size(self) -> int:
        """Bytes the archive holds for it (UTF-8)."""
        return len(self.props.encode()) + len(self.edges.encode()) + len((self.text or "").encode())


@dataclass(frozen=True)
class ArchiveCounts:
    """What the archive holds (of a team, or of the store): changes that can be undone, the items
    they archived, the message texts among them (retired or pruned episodes), and their bytes."""

    changes: int = 0
    items: int = 0
    texts: int = 0
    bytes: int = 0
    oldest: datetime | None = None


class VectorHit(BaseModel):
    id: str
    similarity: float  # cosine similarity in [-1, 1]; 1 is identical
    text: str
    metadata: dict[str, MetaValue]


@dataclass(frozen=True)
class VectorHealth:
    """One collection's dead weight: deleted vectors keep their HNSW slot until it is rebuilt."""

    live: int
    deleted: int  # deletes since this generation was built
    generation: int  # rebuilds so far (0: the original collection)


@dataclass(frozen=True)
class VectorRebuild:
    generation: int  # the new one, now current
    live: int  # vectors it holds
    dropped_deleted: int  # dead slots the old generation held
    discarded: tuple[str, ...] = ()  # leftovers of earlier, interrupted rebuilds dropped first
