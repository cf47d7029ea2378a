"""The settings' sections, one typed model each (what every knob is, its default and its bounds).

Loaded and merged in ``taskzilla_sleep.core.settings``; the packaged defaults are ``data/default.yaml``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskzilla_sleep.core.models import EARLIEST_TIME, LATEST_TIME, TEAM_RE

ENV_PREFIX = "TASKZILLA__"
CHROMA_DEFAULT_TENANT = "default_tenant"  # chromadb.config.DEFAULT_TENANT (not imported: chromadb is slow to load)
CHROMA_DEFAULT_DATABASE = "default_database"
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,99}")
CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|password|cookie", re.IGNORECASE)
NEO4J_SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
_USERINFO = re.compile(r"(?:(?<=://)|^)[^/?#@\s]*@")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _unset_if_blank(v: Any) -> Any:
    # `TASKZILLA__LLM__MODEL=` in an env file, `dir: ""` in YAML: "not set", not a model named ""
    # or the current directory.
    return None if isinstance(v, str) and not v.strip() else v


def _plain_host(v: str) -> str:
    # A URL here would reach the client as a host name and fail far from the setting.
    if not v or "://" in v or re.search(r"[\s/@?#]", v):
        raise ValueError("must be a host name or IP address only (no scheme, path, user or spaces)")
    return v


class GraphSettings(_Section):
    backend: Literal["falkordb", "neo4j"] = "falkordb"
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_database: str = "neo4j"
    falkordb_graph: str = "taskzilla"
    connect_timeout_s: float = Field(default=5.0, gt=0, le=120)

    @field_validator("neo4j_uri")
    @classmethod
    def _neo4j_uri(cls, v: str) -> str:
        try:
            parts = urlsplit(v)
            _ = parts.port  # raises ValueError for a port out of range
        except ValueError as exc:
            raise ValueError(f"not a valid URI ({exc})") from None
        if parts.scheme not in NEO4J_SCHEMES:
            raise ValueError(f"the scheme must be one of {', '.join(NEO4J_SCHEMES)} (e.g. bolt://127.0.0.1:7687)")
        if "@" in parts.netloc:
            # The driver would echo the whole URI (password included) in its error.
            raise ValueError(
                "a user or password in the URI is not allowed: set graph.neo4j_user and the password "
                "in TASKZILLA_NEO4J_PASSWORD"
            )
        if not parts.hostname:
            raise ValueError("the URI has no host (e.g. bolt://127.0.0.1:7687)")
        return v


class VectorSettings(_Section):
    backend: Literal["chroma-embedded", "chroma-server"] = "chroma-embedded"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    # Rebuild a team's collection once its deleted vectors exceed this share of the live ones
    # (HNSW keeps a deleted vector's slot until then); None: never.
    rebuild_deleted_ratio: float | None = Field(default=0.5, gt=0, le=100)
    # A Chroma server's connection, as chromadb's HttpClient takes it (ignored by chroma-embedded):
    # https, the tenant and database the collections live in (both must exist on the server), extra
    # HTTP headers (not credentials: TASKZILLA_CHROMA_TOKEN is sent as ``token_header``).
    ssl: bool = False
    tenant: str = Field(default=CHROMA_DEFAULT_TENANT, min_length=1, max_length=128)
    database: str = Field(default=CHROMA_DEFAULT_DATABASE, min_length=1, max_length=128)
    headers: dict[str, str] = Field(default_factory=dict)
    token_header: Literal["Authorization", "X-Chroma-Token"] = "Authorization"

    _host = field_validator("host")(_plain_host)

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name[:60]!r} is not an HTTP header name (letters, digits and - only)")
            if CREDENTIAL_HEADER.search(name):
                raise ValueError(
                    f"header {name!r} carries a credential: set the token in TASKZILLA_CHROMA_TOKEN (sent as "
                    "vector.token_header), never in a config file"
                )
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"header {name!r}: the value has a line break or NUL")
        return v

    @field_validator("tenant", "database")
    @classmethod
    def _chroma_name(cls, v: str) -> str:
        if v != v.strip() or any(c in v for c in "/?#\\") or not v.isprintable():
            raise ValueError(f"{v[:60]!r} is not a Chroma tenant or database name (no spaces around, no / ? # \\)")
        return v


class EmbeddingSettings(_Section):
    # offline: MiniLM (English); multilingual: multilingual-e5-small (extra `multilingual`); litellm
    provider: Literal["offline", "multilingual", "litellm"] = "offline"
    model: str = "all-MiniLM-L6-v2"
    api_base: str | None = None
    batch_size: int = Field(default=64, ge=1, le=2048)
    timeout_s: float = Field(default=30.0, gt=0, le=600)

    _blank = field_validator("api_base", mode="before")(_unset_if_blank)


class NightBudget(_Section):
    """What a night's distill and reflect may spend on the model (null: unlimited). Checked before each
    batch of questions: the batch that would go over is not asked, its groups (reflect: comparisons)
    stay pending for the next night."""

    calls: int | None = Field(default=None, ge=0)  # per night, every team together
    tokens: int | None = Field(default=None, ge=0)  # prompt + completion, per night
    team_calls: int | None = Field(default=None, ge=0)  # per team and night
    team_tokens: int | None = Field(default=None, ge=0)


class LLMSettings(_Section):
    model: str | None = None  # None: the offline provider (deterministic, no network)
    api_base: str | None = None
    timeout_s: float = Field(default=60.0, gt=0, le=900)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_concurrency: int = Field(default=4, ge=1, le=64)
    temperature: float = Field(default=0.0, ge=0, le=2)
    json_schema: bool = True  # ask for structured output (response_format json_schema) where the server supports it
    batch_groups: int = Field(default=8, ge=1, le=64)  # groups per DISTILL call: the fixed prompt is paid once
    night_budget: NightBudget = Field(default_factory=NightBudget)

    _blank = field_validator("model", "api_base", mode="before")(_unset_if_blank)


class ConnectorRule(_Section):
    """Skipped at ingestion: what a connected tool can re-derive live, or content-free chatter."""

    connected: bool = True
    patterns: list[str] = Field(default_factory=list)

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {p!r}: {exc}") from exc
        return v


class IngestSettings(_Section):
    max_text_chars: int = Field(default=8000, ge=1, le=1_000_000)
    # An episode's ts must lie in [earliest_ts, the ingest clock + max_future_hours]: a year-0001 or
    # year-9999 timestamp is a bug upstream, and stored it would break every later night.
    earliest_ts: datetime = datetime(2000, 1, 1, tzinfo=UTC)
    max_future_hours: float = Field(default=24, ge=0, le=8760)
    projects: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    write_discipline: dict[str, ConnectorRule] = Field(default_factory=dict)

    @field_validator("earliest_ts")
    @classmethod
    def _earliest(cls, v: datetime) -> datetime:
        if v.tzinfo is None or v.utcoffset() is None:
            raise ValueError("needs a UTC offset, e.g. 2000-01-01T00:00:00+00:00")
        if not EARLIEST_TIME <= v < LATEST_TIME - timedelta(days=366):
            raise ValueError("must be between 1900 and 8998")
        return v


class PruneSettings(_Section):
    stale_after_days: int = Field(default=7, ge=1)
    match_threshold: float = Field(default=0.55, ge=-1, le=1)


class DistillSettings(_Section):
    min_episodes: int = Field(default=3, ge=2)
    confidence_floor: float = Field(default=0.80, ge=0, le=1)
    similarity_threshold: float = Field(default=0.55, ge=-1, le=1)
    match_threshold: float = Field(default=0.85, ge=-1, le=1)
    window_days: float = Field(default=7, gt=0)
    max_attempts: int = Field(default=3, ge=1)  # nights a group without a usable answer is asked
    absorb_similarity: float = Field(default=0.5, ge=-1, le=1)  # evidence this close to the statement may be absorbed
    # A group the model found no belief in is asked again once this share of its size (at least one
    # message) has joined it unseen by the model: a busy chatter group is not re-asked for every new
    # line. 0.25 saved 40 % of a busy team's tokens at equal quality (BENCHMARKS.md).
    reask_growth: float = Field(default=0.25, ge=0, le=10)
    # The topics a judge is shown (steps/distill/topics.py): messages about one subject over the
    # window, clustered permissively (never split by value or polarity), cut by time past the cap.
    topic_threshold: float = Field(default=0.40, ge=-1, le=1)
    topic_max_messages: int = Field(default=120, ge=3, le=400)
    # A guard after any judge's answer: a belief is stated by at least ``min_authors`` people, or by
    # fewer on at least ``min_days`` days. One person saying a thing in one conversation is never a belief;
    # a rule taught at 10:00 and confirmed by others is one the same day (the watchdog's promise); one
    # person's view said on several days is a preference or one camp of a disagreement (the ledger keeps
    # it tentative, never absorbed). Every habit, change and camp of the hand-written corpus passes.
    # A message a judge cites supports its statement only this close to it (MiniLM cosine; in the
    # hand-written corpus 99 % of real support is above 0.2 in English, German and Dutch, and 82 % of
    # English status lines, replies and chatter below it): what a careless model cites wholesale is not.
    support_similarity: float = Field(default=0.2, ge=-1, le=1)
    # ... and the cited messages say one thing in other words: their mean cosine to their centre (in
    # the corpus: a belief's messages >= 0.69 in English, 0.78 German, 0.80 Dutch; twelve random
    # messages of a team <= 0.56 / 0.61 / 0.74). A careless model's catch-all is refused.
    min_cohesion: float = Field(default=0.65, ge=0, le=1)
    min_authors: int = Field(default=2, ge=1)
    min_days: int = Field(default=2, ge=1)


class ReflectSettings(_Section):
    stale_after_days: int = Field(default=90, ge=1)
    neighbours: int = Field(default=5, ge=1, le=100)
    max_attempts: int = Field(default=3, ge=1)  # reflects a comparison without a usable answer is asked
    conflict_similarity: float = Field(default=0.6, ge=-1, le=1)  # one topic: a slot disagreement is a contradiction
    min_similarity: float = Field(default=0.35, ge=-1, le=1)


class RecallSettings(_Section):
    # Nothing less close to the question is returned: a belief by its score (the best of its statement
    # and its supporting messages), a message by its own. On the hard-case corpus the right answer
    # closest to each question was never under 0.22, and 95 % of chatter ("lunch?") is under 0.24.
    min_similarity: float = Field(default=0.2, ge=-1, le=1)


class DecaySettings(_Section):
    grace_hours: float = Field(default=72, ge=0)
    # What every run changed is archived (before-images; a retired message's text) so that `undo RUN`
    # and `patterns release` can give it back; a later night purges what is older than this. 0: keep
    # nothing (nothing can be undone; a retired message's text is gone at once, as before the archive).
    archive_days: float = Field(default=30, ge=0)


class WatchdogSettings(_Section):
    enabled: bool = True
    episode_threshold: int = Field(default=3, ge=1)
    cooldown_minutes: float = Field(default=30, ge=0)
    lookback_hours: float = Field(default=2, gt=0)
    # A team whose last night left distill groups deferred (budget, window) is due after the cooldown:
    # one pass over the whole distill window takes them (under the night budget per pass).
    take_deferred: bool = True


class ScheduleSettings(_Section):
    timezone: str = "Europe/Amsterdam"
    prune: time = time(3, 5)
    distill: time = time(3, 10)
    reflect: time = time(3, 15)
    decay: time = time(3, 25)
    misfire_grace_minutes: int = Field(default=60, ge=1)
    # The night's hard stop: past window_end + window_grace_minutes no more model questions are asked;
    # what is left is recorded as deferred and taken first the next night.
    window_end: time = time(3, 25)
    window_grace_minutes: int = Field(default=10, ge=0, le=720)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {v!r}") from exc
        return v


class MemoryIndexSettings(_Section):
    max_entries: int = Field(default=50, ge=1, le=500)
    max_chars: int = Field(default=150, ge=20, le=1000)
    min_topic_patterns: int = Field(default=3, ge=1)
    dir: Path | None = None  # default: DATA_DIR/memory

    _blank = field_validator("dir", mode="before")(_unset_if_blank)


class TokenGrant(_Section):
    """What one API token may do: a name (recorded as ``by`` and in the audit log), its teams
    (``"*"``: every team) and a role (read < write < admin)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@:-]+$")
    teams: tuple[str, ...] = Field(min_length=1)
    role: Literal["read", "write", "admin"] = "read"


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class ApiSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    max_body_bytes: int = Field(default=5_000_000, ge=1024)
    # Tokens by the SHA-256 (hex) of the token; the token itself lives with the bot, never here.
    tokens: dict[str, TokenGrant] = Field(default_factory=dict)
    tokens_file: Path | None = None  # the same mapping in a YAML file of its own (a mounted secret)
    default_team: str | None = None  # the team of a request that names none (else 400)
    ingest_concurrency: int = Field(default=1, ge=1, le=16)  # ingests running at once
    ingest_queue: int = Field(default=8, ge=0, le=1000)  # ingests waiting; more: 429 + Retry-After
    # The worker's address as people reach it (e.g. https://memory.example.com): chat alerts link to
    # the console page of a contradiction under it. None: no link.
    public_url: str | None = None

    _host = field_validator("host")(_plain_host)
    _blank = field_validator("default_team", "tokens_file", "public_url", mode="before")(_unset_if_blank)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, v: str | None) -> str | None:
        p = urlsplit(v or "")
        if v is not None and (p.scheme not in ("http", "https") or not p.hostname or "@" in p.netloc or p.query):
            raise ValueError("must be an http(s) URL (no user, password or query), e.g. https://memory.example.com")
        return v.rstrip("/") if v else v

    @field_validator("tokens")
    @classmethod
    def _hashes(cls, v: dict[str, TokenGrant]) -> dict[str, TokenGrant]:
        for key in v:
            if not _SHA256_HEX.match(key):
                raise ValueError(
                    f"key {key[:8]}... is not a SHA-256 hex digest: put sha256(token) here, never the "
                    "token itself (python -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode())"
                    ".hexdigest())' TOKEN)"
                )
        return v


# A decider's id by channel kind: what a click carries (Slack's user.id, Telegram's from.id).
_DECIDER = {
    "slack": (r"[UW][A-Z0-9]{2,30}", "e.g. U0123ABCD, from the person's Slack profile: Copy member ID"),
    "telegram": (r"[1-9][0-9]{0,19}", "a number, e.g. 123456789"),
}


class AlertChannel(_Section):
    """One chat destination. URLs and tokens come from the environment variables named here."""

    kind: Literal["slack", "telegram", "webhook"]
    url_env: str | None = None  # slack/webhook: env var holding the URL (it embeds a secret)
    token_env: str | None = None  # telegram: env var holding the bot token
    chat_id: str | None = None  # telegram chat id (not a secret)
    enabled: bool = True
    # The teams whose alerts this channel gets; "*" is every team (and the team-less nightly summary).
    teams: list[str] = Field(default_factory=lambda: ["*"], min_length=1)
    # Resolving from chat (buttons). Slack: the env var of the app's signing secret, and the Slack
    # channel id (C0123...) a click must come from; Telegram: the env var of setWebhook's secret_token.
    signing_secret_env: str | None = None
    channel_id: str | None = None
    webhook_secret_env: str | None = None
    # Who may decide from this channel: Slack user ids (U0123ABCD) or Telegram user ids (42). Empty:
    # anyone in the channel. A click by anyone else is answered "not allowed" and changes nothing.
    deciders: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _interactivity(self) -> AlertChannel:
        if self.signing_secret_env and self.kind != "slack":
            raise ValueError("signing_secret_env is for slack channels (telegram: webhook_secret_env)")
        if self.webhook_secret_env and self.kind != "telegram":
            raise ValueError("webhook_secret_env is for telegram channels (slack: signing_secret_env)")
        if self.signing_secret_env and not self.channel_id:
            raise ValueError("channel_id (the Slack channel id, e.g. C0123ABCD) is required with signing_secret_env")
        if self.deciders and not self.interactive:
            raise ValueError(
                "deciders is for channels people resolve from: set signing_secret_env (slack) or "
                "webhook_secret_env (telegram)"
            )
        pattern, example = _DECIDER.get(self.kind, (r"", ""))
        for d in self.deciders:
            if not re.fullmatch(pattern, d):
                raise ValueError(f"deciders: {d[:40]!r} is not a {self.kind} user id ({example})")
        return self

    @property
    def interactive(self) -> bool:
        """Whether people resolve from this channel: its alerts carry buttons."""
        return bool(self.signing_secret_env or self.webhook_secret_env)

    @field_validator("teams")
    @classmethod
    def _team_names(cls, v: list[str]) -> list[str]:
        for t in v:
            if t != "*" and not re.fullmatch(TEAM_RE, t):
                raise ValueError(f"{t!r} is not a team name (or '*' for every team)")
        return v

    def routes(self, team: str | None) -> bool:
        """Whether an alert of ``team`` goes to this channel (None: not one team's, e.g. the nightly summary)."""
        return "*" in self.teams or (team is not None and team in self.teams)


class AlertSettings(_Section):
    channels: dict[str, AlertChannel] = Field(default_factory=dict)
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    max_attempts: int = Field(default=50, ge=1)  # then the alert is marked failed (still kept, still listed)
    backoff_base_s: float = Field(default=30.0, gt=0)
    backoff_max_s: float = Field(default=3600.0, gt=0)
    nightly_summary: bool = False  # also post the night's summary to the channels


class MetricsSettings(_Section):
    # The per-team series of /metrics (taskzilla_sleep_team_*): this many teams (by name) get a `team`
    # label each; the rest are summed as team="other". ~8 series a team: 20 teams stay under ~170
    # series a replica, far inside a Prometheus target's usual budget, and cover most deployments
    # whole. 0: only team="other" (every team summed).
    team_labels_max: int = Field(default=20, ge=0, le=1000)


class WorkerSettings(_Section):
    lease_ttl_s: float = Field(default=120.0, ge=5)  # a dead holder's lease expires after this
    team_concurrency: int = Field(default=1, ge=1, le=64)  # team jobs at once in one process
    poll_s: float = Field(default=30.0, gt=0)  # watchdog and outbox polling interval
    shutdown_grace_s: float = Field(default=30.0, ge=0)  # SIGTERM: time to finish the batch in flight
    catch_up: bool = True  # a missed night runs once at start
