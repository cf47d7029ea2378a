"""The domain: episodes, entities, patterns, contradictions, runs and tombstones.

Times are timezone-aware ``datetime`` objects in Python; the stores keep them as epoch
milliseconds (both Cypher dialects agree on integers, not on ``datetime()``).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
TEAM_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$"

EpisodeId = Annotated[str, StringConstraints(pattern=ID_RE)]
TeamName = Annotated[str, StringConstraints(pattern=TEAM_RE)]


class Provenance(StrEnum):
    """Where an episode came from. ``ai-draft`` (the bot's own drafts) is never learned from."""

    HUMAN = "human"
    BOT = "bot"
    AI_DRAFT = "ai-draft"
    IMPORT = "import"


class EpisodeStatus(StrEnum):
    """raw -> absorbed -> retired; raw -> pruned."""

    RAW = "raw"
    ABSORBED = "absorbed"
    RETIRED = "retired"
    PRUNED = "pruned"


class PatternStatus(StrEnum):
    """tentative -> active -> contested -> superseded / retired."""

    TENTATIVE = "tentative"
    ACTIVE = "active"
    CONTESTED = "contested"
    SUPERSEDED = "superseded"
    RETIRED = "retired"


class PatternKind(StrEnum):
    PREFERENCE = "preference"
    PROCESS = "process"
    NORM = "norm"
    FACT = "fact"


class EntityKind(StrEnum):
    PERSON = "person"
    CHANNEL = "channel"
    PROJECT = "project"
    TOOL = "tool"
    TOPIC = "topic"


class ContradictionStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


# Statuses whose items have a vector in Chroma; anything else must not.
EPISODE_LIVE = frozenset({EpisodeStatus.RAW, EpisodeStatus.ABSORBED})
PATTERN_LIVE = frozenset({PatternStatus.TENTATIVE, PatternStatus.ACTIVE, PatternStatus.CONTESTED})


def to_ms(t: datetime) -> int:
    """Epoch milliseconds of an aware datetime."""
    if t.tzinfo is None:
        raise ValueError("naive datetime: a timezone is required")
    return int(t.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def episode_id_for(team: str, channel: str, author: str, ts: datetime, text: str) -> str:
    """Content-derived id: the same message ingested twice gets the same id (re-ingest is a no-op)."""
    key = "\x1f".join([team, channel, author, str(to_ms(ts)), text])
    return "ep_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


class EpisodeIn(BaseModel):
    """One line of an ingest file, exactly as a bot writes it. Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    id: EpisodeId | None = None
    team: TeamName
    channel: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    author: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    text: Annotated[str, StringConstraints(min_length=1)]
    ts: datetime
    provenance: Provenance
    connector: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None

    @field_validator("ts")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None or v.utcoffset() is None:
            raise ValueError("timestamp has no timezone offset (write e.g. 2026-11-30T10:02:00+01:00)")
        return v

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text is blank")
        return v


class Episode(BaseModel):
    """A raw chat message as stored: the same id in the graph and in Chroma."""

    model_config = ConfigDict(extra="forbid")

    id: str
    team: str
    channel: str
    author: str
    text: str
    ts: datetime
    provenance: Provenance
    connector: str | None = None
    status: EpisodeStatus = EpisodeStatus.RAW
    schema_absorbed: int = 0
    absorbed_at: datetime | None = None
    absorbed_by: str | None = None
    ingested_at: datetime
    last_accessed: datetime | None = None
    pinned: bool = False
    # Set by the nightly distill that took this episode into account (asked about its group, or
    # found no group for it); None = arrived since, still to be distilled, whatever its ``ts`` says.
    distilled_at: datetime | None = None
    distill_attempts: int = 0  # nightly distills whose question about its group got no usable answer

    @classmethod
    def from_input(cls, item: EpisodeIn, ingested_at: datetime) -> Episode:
        eid = item.id or episode_id_for(item.team, item.channel, item.author, item.ts, item.text)
        return cls(
            id=eid,
            team=item.team,
            channel=item.channel,
            author=item.author,
            text=item.text,
            ts=item.ts,
            provenance=item.provenance,
            connector=item.connector,
            ingested_at=ingested_at,
        )


class Entity(BaseModel):
    """A person, channel, project, tool or topic; ``key`` is unique per team and kind."""

    model_config = ConfigDict(extra="forbid")

    team: str
    kind: EntityKind
    name: str

    @property
    def key(self) -> str:
        return f"{self.team}/{self.kind.value}/{normalize_name(self.name)}"


EntityRole = Literal["author", "channel", "mention", "tag", "project", "tool"]


class EntityLink(BaseModel):
    """An episode mentions an entity in some role (author, channel, @mention, #tag, project, tool)."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    entity: Entity
    role: EntityRole


class Pattern(BaseModel):
    """A distilled, reusable belief with an evidence ledger."""

    model_config = ConfigDict(extra="forbid")

    id: str
    team: str
    statement: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    kind: PatternKind
    status: PatternStatus = PatternStatus.TENTATIVE
    confidence: float = Field(ge=0.0, le=1.0)
    llm_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    evidence_ids: list[str] = Field(default_factory=list)
    support_count: int = 0
    counter_count: int = 0
    distinct_authors: int = 0
    distinct_channels: int = 0
    first_seen: datetime
    last_seen: datetime
    created_at: datetime
    updated_at: datetime
    valid_from: datetime
    valid_to: datetime | None = None
    subjects: list[str] = Field(default_factory=list)
    topic: str = "general"
    pinned: bool = False
    pinned_by: str | None = None
    availability_lag_s: float | None = None  # third supporting episode ingested -> pattern recallable
    superseded_by: str | None = None
    archived_by: str | None = None
    archived_at: datetime | None = None
    archived_reason: str | None = None
    reflect_attempts: int = 0  # reflects in a row in which a comparison of this pattern got no usable answer


class Contradiction(BaseModel):
    """Two beliefs that disagree. Both stay; only a person's resolution supersedes one."""

    model_config = ConfigDict(extra="forbid")

    id: str
    team: str
    old_pattern_id: str
    new_pattern_id: str
    status: ContradictionStatus = ContradictionStatus.OPEN
    opened_at: datetime
    reason: str = ""
    resolution: Literal["new", "old", "both"] | None = None
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    note: str | None = None


class Tombstone(BaseModel):
    """What is left of an item removed from the stores: the audit trail stays whole."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["episode", "pattern"]
    team: str
    at: datetime
    reason: str
    pattern_id: str | None = None


StepName = Literal["prune", "distill", "reflect", "decay"]
RunTrigger = Literal["schedule", "catch-up", "watchdog", "manual", "demo"]
StepStatusName = Literal["pending", "running", "ok", "failed", "skipped", "abandoned"]


class StepResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: StepName
    status: StepStatusName = "pending"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None


class Run(BaseModel):
    """One night (or one watchdog distill, or one run-once) in the run ledger."""

    model_config = ConfigDict(extra="forbid")

    id: str
    trigger: RunTrigger
    started_at: datetime
    finished_at: datetime | None = None
    now: datetime
    dry_run: bool = False
    steps: list[StepResult] = Field(default_factory=list)
    slot: str | None = None  # the scheduled night this run is (e.g. "2026-11-28"), for exactly-once
    # Store sizes (episodes, patterns, vectors, nodes, edges) around the run.
    sizes_before: dict[str, int] = Field(default_factory=dict)
    sizes_after: dict[str, int] = Field(default_factory=dict)
    # Availability lag of the patterns this run created (third supporting episode -> recallable).
    pattern_lags_s: list[float] = Field(default_factory=list)
    # Entries of the memory index rebuilt after the run (Kent: stable, near the cap).
    memory_index_entries: int | None = None


_WS = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Entity names compare case- and space-insensitively; '@' and '#' prefixes are dropped."""
    return _WS.sub(" ", name.strip().lstrip("@#")).casefold()
