"""The domain: episodes, entities, patterns, contradictions, runs and tombstones.

Times are timezone-aware ``datetime`` objects in Python; the stores keep them as epoch
milliseconds (both Cypher dialects agree on integers, not on ``datetime()``).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    field_validator,
)

ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
TEAM_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$"

# Characters no store can carry: NUL (FalkorDB's client inlines parameters into a query header that
# ends at it) and lone surrogates (JSON's "\ud800" escapes allow them; UTF-8, which every backend
# speaks, cannot encode them). Everything else round-trips on both graph backends and Chroma.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored (which character, where), or None when it can."""
    m = _UNSTORABLE.search(text)
    if m is None:
        return None
    what = "NUL" if m.group() == "\x00" else "a lone surrogate"
    return f"character {m.start() + 1} is U+{ord(m.group()):04X} ({what}), which the stores cannot hold"


def _storable(v: str) -> str:
    why = unstorable(v)
    if why is not None:
        raise ValueError(why)
    return v


StorableStr = Annotated[str, AfterValidator(_storable)]
EpisodeId = Annotated[str, StringConstraints(pattern=ID_RE)]
TeamName = Annotated[str, StringConstraints(pattern=TEAM_RE)]
_NUMBER = re.compile(r"\s*[-+]?\d+(\.\d*)?\s*")


class Provenance(StrEnum):
    """Where an episode came from. ``ai-draft`` (the bot's own drafts) is never learned from."""

    HUMAN = "human"
    BOT = "bot"
    AI_DRAFT = "ai-draft"
    IMPORT = "import"


class EpisodeStatus(StrEnum):
    """raw -> absorbed -> retired; raw -> pruned. Any -> quarantined (stored props that cannot be read);
    any -> forgotten (a person asked: text, mentions and vector gone; the node keeps the id and hash, so
    the same message delivered again is recognised and not stored again)."""

    RAW = "raw"
    ABSORBED = "absorbed"
    RETIRED = "retired"
    PRUNED = "pruned"
    QUARANTINED = "quarantined"
    FORGOTTEN = "forgotten"


class PatternStatus(StrEnum):
    """tentative -> active -> contested -> superseded / retired. Any -> quarantined (unreadable props)."""

    TENTATIVE = "tentative"
    ACTIVE = "active"
    CONTESTED = "contested"
    SUPERSEDED = "superseded"
    RETIRED = "retired"
    QUARANTINED = "quarantined"


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


class ContradictionKind(StrEnum):
    """``update``: the team changed its practice (the newer belief stays usable, marked unconfirmed);
    ``disagreement``: both are meant to hold now and people disagree (both contested)."""

    UPDATE = "update"
    DISAGREEMENT = "disagreement"


class Evidence(StrEnum):
    """How a belief is supported, as the distiller judged it: a rubric, mapped to numbers in code."""

    EXPLICIT_RULE = "explicit_rule"  # somebody states it as the team's rule or agreement
    REPEATED_PRACTICE = "repeated_practice"  # people keep doing or saying it, no rule announced
    MIXED = "mixed"  # some support, some doubt or exceptions
    SINGLE_OPINION = "single_opinion"  # one person's view, however often repeated


class ContradictionStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    QUARANTINED = "quarantined"


# Statuses whose items have a vector in Chroma; anything else must not.
EPISODE_LIVE = frozenset({EpisodeStatus.RAW, EpisodeStatus.ABSORBED})
PATTERN_LIVE = frozenset({PatternStatus.TENTATIVE, PatternStatus.ACTIVE, PatternStatus.CONTESTED})


# The times the stores hold. Far wider than any message or clock, narrow enough that a step's date
# arithmetic (now - window, ts + grace, ...) never leaves Python's years 1..9999: a time outside is
# never written (to_ms raises) and a stored one is unreadable (from_ms raises; the item is quarantined).
EARLIEST_TIME = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9000, 1, 1, tzinfo=UTC)
_MS_RANGE = (int(EARLIEST_TIME.timestamp() * 1000), int(LATEST_TIME.timestamp() * 1000))


def iso_time(t: datetime) -> str:
    """How every time leaves the process in JSON (CLI --json, the API, exports): RFC 3339 in UTC with
    ``Z``, as pydantic writes a UTC time, whatever offset the value carries (a ``--now`` in +01:00, the
    worker's Amsterdam clock, a time read back from the stores in UTC)."""
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


# A datetime field: the value keeps its offset in Python; its JSON is iso_time's (schema: date-time).
Time = Annotated[datetime, PlainSerializer(iso_time, when_used="json")]


def to_ms(t: datetime) -> int:
    """Epoch milliseconds of an aware datetime within EARLIEST_TIME..LATEST_TIME."""
    if t.tzinfo is None:
        raise ValueError("naive datetime: a timezone is required")
    ms = int(t.timestamp() * 1000)
    if not _MS_RANGE[0] <= ms < _MS_RANGE[1]:
        raise ValueError(f"time {t.isoformat()} is outside the range the stores hold (years 1900 to 8999)")
    return ms


def from_ms(ms: int) -> datetime:
    if not _MS_RANGE[0] <= ms < _MS_RANGE[1]:
        raise ValueError(f"stored time {ms} ms is outside the range the stores hold (years 1900 to 8999)")
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def episode_id_for(team: str, channel: str, author: str, ts: datetime, text: str) -> str:
    """Content-derived id: the same message ingested twice gets the same id (re-ingest is a no-op)."""
    key = "\x1f".join([team, channel, author, str(to_ms(ts)), text])
    return "ep_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


# What makes two episodes with one id "the same message" (connector, a routing hint, is left out).
CONTENT_FIELDS = ("team", "channel", "author", "ts", "provenance", "text")


class EpisodeIn(BaseModel):
    """One line of an ingest file, exactly as a bot writes it. Unknown fields are rejected."""

    model_config = ConfigDict(
        extra="forbid",
        str_strip_whitespace=False,
        json_schema_extra={
            "examples": [
                {
                    "id": "slack-C024BE91L-1732790520.000200",
                    "team": "platform",
                    "channel": "deploys",
                    "author": "sara",
                    "text": "reminder: no deploys to production on Fridays",
                    "ts": "2026-11-27T10:02:00+01:00",
                    "provenance": "human",
                },
                {
                    "id": "slack-C024BE91L-1732790580.000300",
                    "team": "platform",
                    "channel": "deploys",
                    "author": "tom",
                    "text": "agreed: no Friday deploys, hotfixes excepted",
                    "ts": "2026-11-27T10:03:00+01:00",
                    "provenance": "human",
                    "thread_id": "slack-C024BE91L-1732790520.000200",
                    "reply_to": "slack-C024BE91L-1732790520.000200",
                    "edited_at": "2026-11-27T10:05:00+01:00",
                },
            ]
        },
    )

    id: EpisodeId | None = None
    team: TeamName
    channel: Annotated[StorableStr, StringConstraints(min_length=1, max_length=200)]
    author: Annotated[StorableStr, StringConstraints(min_length=1, max_length=200)]
    text: Annotated[StorableStr, StringConstraints(min_length=1)]
    ts: Time
    provenance: Provenance
    connector: Annotated[StorableStr, StringConstraints(min_length=1, max_length=64)] | None = None
    # Threads: the chat's thread (its root message's id, or the platform's thread id) and the message
    # this one answers. Free ids: the message answered may arrive later, or never.
    thread_id: EpisodeId | None = None
    reply_to: EpisodeId | None = None
    # When the text was last edited: a later edit of a stored message replaces its text (see ingest).
    edited_at: Time | None = None

    @field_validator("ts", "edited_at", mode="before")
    @classmethod
    def _not_a_number(cls, v: object) -> object:
        # pydantic reads a number (or a numeric string) as Unix seconds in UTC: a guess, not a zone.
        if (isinstance(v, int | float) and not isinstance(v, bool)) or (isinstance(v, str) and _NUMBER.fullmatch(v)):
            raise ValueError(
                "a number is not a timestamp with a time zone (write ISO-8601, e.g. 2026-11-30T10:02:00+01:00)"
            )
        return v

    @field_validator("ts", "edited_at")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and (v.tzinfo is None or v.utcoffset() is None):
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
    ts: Time
    provenance: Provenance
    connector: str | None = None
    thread_id: str | None = None
    reply_to: str | None = None  # the id of the message this one answers (a REPLY_TO link once both are stored)
    edited_at: Time | None = None  # the edit whose text this is (None: the text as first sent)
    status: EpisodeStatus = EpisodeStatus.RAW
    schema_absorbed: int = 0
    absorbed_at: Time | None = None
    absorbed_by: str | None = None
    ingested_at: Time
    last_accessed: Time | None = None
    pinned: bool = False
    # Set by the nightly distill that took this episode into account (asked about its group, or
    # found no group for it); None = arrived since, still to be distilled, whatever its ``ts`` says.
    distilled_at: Time | None = None
    distill_attempts: int = 0  # nights whose distill asked about its group and got no usable answer
    # The night that counted the last of them (``scheduler.calendar_night``: its date in the schedule's
    # time zone): a rerun, a catch-up or a watchdog pass of that night counts no second. None: none yet.
    distill_night: str | None = None
    # The size of the largest group holding it that the model found no belief in (0: none). Such a
    # group is asked again only once enough messages it did not see have joined it.
    declined_size: int = 0
    # The injection lint flagged its text (an order to the assistant, a role marker, a secret): computed
    # once, by the ingest or edit that wrote the text (``rules.beliefs.flagged``), and kept with the
    # lint's version. None (stored before flags were kept) or another version (an older lint's): readers
    # ask the lint, never take it as clean, and reconcile writes the current one (memory/flags.py).
    injection: bool | None = None
    injection_lint: str | None = None

    def content(self) -> dict[str, str | int]:
        """The fields of CONTENT_FIELDS as the graph stores them (ts in epoch ms)."""
        return {
            "team": self.team,
            "channel": self.channel,
            "author": self.author,
            "ts": to_ms(self.ts),
            "provenance": self.provenance.value,
            "text": self.text,
        }

    def content_hash(self) -> str:
        """Kept on the node at ingest, so a reused id is still recognised after the text is dropped."""
        c = self.content()
        key = "\x1f".join(str(c[f]) for f in CONTENT_FIELDS)
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]

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
            thread_id=item.thread_id,
            reply_to=item.reply_to,
            edited_at=item.edited_at,
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

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

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
    first_seen: Time
    last_seen: Time
    created_at: Time
    updated_at: Time
    valid_from: Time
    valid_to: Time | None = None
    subjects: list[str] = Field(default_factory=list)
    topic: str = "general"
    pinned: bool = False
    pinned_by: str | None = None
    availability_lag_s: float | None = None  # third supporting episode ingested -> pattern recallable
    superseded_by: str | None = None
    archived_by: str | None = None
    archived_at: Time | None = None
    archived_reason: str | None = None
    reflect_attempts: int = 0  # reflects in a row in which a comparison of this pattern got no usable answer
    evidence: Evidence | None = None  # the distiller's evidence category (None: written before it existed)
    prompt_id: str | None = None  # the prompt (or offline rule set) that produced the statement
    replaces: str | None = None  # the distiller saw a change: the earlier practice this one replaces


class Contradiction(BaseModel):
    """Two beliefs that disagree. Both stay; only a person's resolution supersedes one."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    id: str
    team: str
    old_pattern_id: str
    new_pattern_id: str
    status: ContradictionStatus = ContradictionStatus.OPEN
    # Stores written before kinds existed read as disagreements: the old behaviour, both contested.
    kind: ContradictionKind = ContradictionKind.DISAGREEMENT
    opened_at: Time
    reason: str = ""
    resolution: Literal["new", "old", "both"] | None = None
    resolved_by: str | None = None
    resolved_at: Time | None = None
    note: str | None = None
    prompt_id: str | None = None  # the reflect prompt (or offline rule set) whose verdict opened it

    @property
    def pattern_ids(self) -> tuple[str, str]:
        return (self.old_pattern_id, self.new_pattern_id)


class Tombstone(BaseModel):
    """What is left of an item removed from the stores: the audit trail stays whole. It never holds
    message text: an id, a time, a reason, the pattern an episode fed, and who asked (``by``) when a
    person made the store forget it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["episode", "pattern"]
    team: str
    at: Time
    reason: str
    pattern_id: str | None = None
    by: str | None = None


# The nightly steps in cycle order, written here and nowhere else. Prune before distill (yesterday's
# garbage must not shape today's patterns); decay after reflect (an episode is not retired before its
# lesson survived the cross-check).
StepName = Literal["prune", "distill", "reflect", "decay"]
STEP_NAMES: tuple[StepName, ...] = get_args(StepName)
RunTrigger = Literal["schedule", "catch-up", "watchdog", "manual", "demo"]
StepStatusName = Literal["pending", "running", "ok", "failed", "skipped", "abandoned", "deferred"]
# A step that did its work, all of it ("ok") or what the budget or the window allowed ("deferred": the
# rest is pending and taken first the next night). A night of such steps is done for its slot.
STEP_DONE: frozenset[str] = frozenset({"ok", "deferred"})


class StepResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: StepName
    status: StepStatusName = "pending"
    started_at: Time | None = None
    finished_at: Time | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None
    prompt_ids: list[str] = Field(default_factory=list)  # the prompts the step's model calls used
    # What the budget or the window left for the next night, and why: one line per team.
    deferred: list[str] = Field(default_factory=list)
    estimate_cost_usd: float | None = None  # the pre-flight estimate's cost (None: unknown or none made)


class Run(BaseModel):
    """One night (or one watchdog distill, or one run-once) in the run ledger."""

    model_config = ConfigDict(extra="forbid")

    id: str
    trigger: RunTrigger
    started_at: Time
    finished_at: Time | None = None
    now: Time
    dry_run: bool = False
    steps: list[StepResult] = Field(default_factory=list)
    slot: str | None = None  # the scheduled night this run is (e.g. "2026-11-28"), for exactly-once
    team: str | None = None  # the one team this run worked on (a worker's team job); None: several or all
    # Store sizes (episodes, patterns, vectors, nodes, edges) around the run.
    sizes_before: dict[str, int] = Field(default_factory=dict)
    sizes_after: dict[str, int] = Field(default_factory=dict)
    # Availability lag of the patterns this run created (third supporting episode -> recallable).
    pattern_lags_s: list[float] = Field(default_factory=list)
    # Entries of the memory index rebuilt after the run (healthy: stable, near the cap).
    memory_index_entries: int | None = None
    # A person undid what this run changed (``undo RUN_ID``): when, who and why.
    undone_at: Time | None = None
    undone_by: str | None = None
    undo_reason: str | None = None

    def abandoned(self, by: str) -> Run | None:
        """This unfinished run as found after its process died (kill -9, power cut): the step in flight
        ``abandoned``, the steps after it ``skipped``. None when every step was recorded and only the
        closing save was lost (there is nothing to mark)."""
        if self.finished_at is not None or all(s.status not in ("running", "pending") for s in self.steps):
            return None
        dead = self.model_copy(deep=True)
        for s in dead.steps:
            if s.status == "running":
                s.status = "abandoned"
                s.error = f"its process stopped before the step finished (found by {by})"
            elif s.status == "pending":
                s.status = "skipped"
        return dead


_WS = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Entity names compare case- and space-insensitively; '@' and '#' prefixes are dropped."""
    return _WS.sub(" ", name.strip().lstrip("@#")).casefold()
