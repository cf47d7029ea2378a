"""One typed Settings object: YAML (the packaged data/default.yaml < --config FILE) < env < command-line flags.

Env overrides use ``TASKZILLA__SECTION__KEY`` (e.g. ``TASKZILLA__GRAPH__BACKEND=neo4j``).
Secrets are read from the environment only (see :class:`Secrets`) and are never part of the
settings that get printed or logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, time, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from taskzilla_sleep.errors import ConfigError
from taskzilla_sleep.models import EARLIEST_TIME, LATEST_TIME, TEAM_RE

ENV_PREFIX = "TASKZILLA__"
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
    batch_size: int = Field(default=500, ge=1, le=10_000)

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

    _host = field_validator("host")(_plain_host)


class EmbeddingSettings(_Section):
    provider: Literal["offline", "litellm"] = "offline"
    model: str = "all-MiniLM-L6-v2"
    api_base: str | None = None
    batch_size: int = Field(default=64, ge=1, le=2048)
    timeout_s: float = Field(default=30.0, gt=0, le=600)

    _blank = field_validator("api_base", mode="before")(_unset_if_blank)


class LLMSettings(_Section):
    model: str | None = None  # None: the offline provider (deterministic, no network)
    api_base: str | None = None
    timeout_s: float = Field(default=60.0, gt=0, le=900)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_concurrency: int = Field(default=4, ge=1, le=64)
    temperature: float = Field(default=0.0, ge=0, le=2)
    json_schema: bool = True  # ask for structured output (response_format json_schema) where the server supports it
    batch_groups: int = Field(default=8, ge=1, le=64)  # groups per DISTILL call: the fixed prompt is paid once

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
    topic_bonus: float = Field(default=0.05, ge=0, le=1)  # per rare topic word shared with a group (at most two)
    value_bonus: float = Field(default=0.15, ge=0, le=1)  # a group stating the same amount, count, time or date
    match_threshold: float = Field(default=0.85, ge=-1, le=1)
    window_days: float = Field(default=7, gt=0)
    max_attempts: int = Field(default=3, ge=1)  # nights a group without a usable answer is asked
    absorb_similarity: float = Field(default=0.5, ge=-1, le=1)  # evidence this close to the statement may be absorbed
    # A group the model found no belief in is asked again once this share of its size (at least one
    # message) has joined it unseen by the model: a busy chatter group is not re-asked for every new
    # line. 0.25 saved 40 % of a busy team's tokens at equal quality (BENCHMARKS.md).
    reask_growth: float = Field(default=0.25, ge=0, le=10)


class ReflectSettings(_Section):
    stale_after_days: int = Field(default=90, ge=1)
    neighbours: int = Field(default=5, ge=1, le=100)
    max_attempts: int = Field(default=3, ge=1)  # reflects a comparison without a usable answer is asked
    conflict_similarity: float = Field(default=0.6, ge=-1, le=1)  # one topic: a slot disagreement is a contradiction
    min_similarity: float = Field(default=0.35, ge=-1, le=1)


class DecaySettings(_Section):
    grace_hours: float = Field(default=72, ge=0)


class WatchdogSettings(_Section):
    enabled: bool = True
    episode_threshold: int = Field(default=3, ge=1)
    cooldown_minutes: float = Field(default=30, ge=0)
    lookback_hours: float = Field(default=2, gt=0)


class ScheduleSettings(_Section):
    timezone: str = "Europe/Amsterdam"
    prune: time = time(3, 5)
    distill: time = time(3, 10)
    reflect: time = time(3, 15)
    decay: time = time(3, 25)
    misfire_grace_minutes: int = Field(default=60, ge=1)

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

    @model_validator(mode="after")
    def _interactivity(self) -> AlertChannel:
        if self.signing_secret_env and self.kind != "slack":
            raise ValueError("signing_secret_env is for slack channels (telegram: webhook_secret_env)")
        if self.webhook_secret_env and self.kind != "telegram":
            raise ValueError("webhook_secret_env is for telegram channels (slack: signing_secret_env)")
        if self.signing_secret_env and not self.channel_id:
            raise ValueError("channel_id (the Slack channel id, e.g. C0123ABCD) is required with signing_secret_env")
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


class WorkerSettings(_Section):
    lease_ttl_s: float = Field(default=120.0, ge=5)  # a dead holder's lease expires after this
    poll_s: float = Field(default=30.0, gt=0)  # watchdog and outbox polling interval
    shutdown_grace_s: float = Field(default=30.0, ge=0)  # SIGTERM: time to finish the batch in flight
    catch_up: bool = True  # a missed night runs once at start


class Settings(_Section):
    data_dir: Path = Field(default_factory=lambda: default_data_dir())
    graph: GraphSettings = GraphSettings()
    vector: VectorSettings = VectorSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    llm: LLMSettings = LLMSettings()
    ingest: IngestSettings = IngestSettings()
    prune: PruneSettings = PruneSettings()
    distill: DistillSettings = DistillSettings()
    reflect: ReflectSettings = ReflectSettings()
    decay: DecaySettings = DecaySettings()
    watchdog: WatchdogSettings = WatchdogSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    memory_index: MemoryIndexSettings = MemoryIndexSettings()
    api: ApiSettings = ApiSettings()
    alerts: AlertSettings = AlertSettings()
    worker: WorkerSettings = WorkerSettings()
    # Where the settings came from, for `status` (not a knob).
    config_files: tuple[str, ...] = ()

    @property
    def memory_dir(self) -> Path:
        return self.memory_index.dir or self.data_dir / "memory"


class Secrets(BaseModel):
    """Credentials, from the environment only. ``repr`` and logs show ``**********``."""

    model_config = ConfigDict(frozen=True)

    neo4j_password: SecretStr | None = None
    chroma_token: SecretStr | None = None
    api_token: SecretStr | None = None
    mcp_token: SecretStr | None = None  # the stdio MCP server's caller (one of the API's tokens)

    def values(self) -> list[str]:
        """Every secret set, for the log masker."""
        found = (self.neo4j_password, self.chroma_token, self.api_token, self.mcp_token)
        return [s.get_secret_value() for s in found if s]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Secrets:
        def get(*names: str) -> SecretStr | None:
            for n in names:
                if env.get(n):
                    return SecretStr(env[n])
            return None

        return cls(
            neo4j_password=get("TASKZILLA_NEO4J_PASSWORD", "NEO4J_PASSWORD"),
            chroma_token=get("TASKZILLA_CHROMA_TOKEN", "CHROMA_TOKEN"),
            api_token=get("TASKZILLA_API_TOKEN"),
            mcp_token=get("TASKZILLA_MCP_TOKEN"),
        )


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "taskzilla-sleep"


def packaged_default_yaml() -> str:
    return resources.files("taskzilla_sleep").joinpath("data/default.yaml").read_text(encoding="utf-8")


def _deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _set_path(tree: dict[str, Any], dotted: str, value: Any, origin: str) -> None:
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        raise ConfigError(f"config error: empty key in {origin}")
    node = tree
    for p in parts[:-1]:
        child = node.get(p)
        if not isinstance(child, dict):
            child = {}
            node[p] = child
        node = child
    node[parts[-1]] = value


def parse_scalar(raw: str) -> Any:
    """Env and --set values are YAML scalars: 'true', '3', '0.8', '[a, b]' parse as expected.

    What does not parse as YAML (or nests too deeply for the parser) stays the raw string, which
    validation then reports with its key.
    """
    try:
        return yaml.safe_load(raw) if raw != "" else ""
    except (yaml.YAMLError, RecursionError):
        return raw


def mask_userinfo(value: Any) -> Any:
    """``scheme://user:password@host`` (or ``user:password@host``) -> ``scheme://***@host``."""
    return _USERINFO.sub("***@", value) if isinstance(value, str) else value


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config error: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config error: {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config error: {path}{where}: not valid YAML") from exc
    except RecursionError:
        raise ConfigError(f"config error: {path}: nested too deeply to be a config file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config error: {path}: the top level must be a mapping of sections")
    return data


def load_settings(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build Settings from the packaged defaults, an optional YAML file, env and flag overrides.

    Raises ConfigError (exit code 2) with one line: the key, the value and what is allowed.
    """
    env = os.environ if env is None else env
    tree = yaml.safe_load(packaged_default_yaml()) or {}
    origins: dict[str, str] = {}
    files: list[str] = ["(packaged default)"]

    config_file = config_file or (Path(env["TASKZILLA_CONFIG"]) if env.get("TASKZILLA_CONFIG") else None)
    if config_file is not None:
        tree = _deep_merge(tree, _read_yaml(config_file))
        files.append(str(config_file))

    if env.get("TASKZILLA_DATA_DIR"):
        tree["data_dir"] = env["TASKZILLA_DATA_DIR"]
        origins["data_dir"] = "TASKZILLA_DATA_DIR"
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        _set_path(tree, dotted, parse_scalar(raw), name)
        origins[dotted] = name
    for dotted, value in (overrides or {}).items():
        _set_path(tree, dotted, value, "command line")
        origins[dotted] = "command line"

    tree["config_files"] = tuple(files)
    if tree.get("data_dir") in (None, ""):
        tree["data_dir"] = str(default_data_dir(env))
    try:
        return Settings.model_validate(tree)
    except ValidationError as exc:
        failure = exc
    err = failure.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    value = err.get("input")
    # A key set below a scalar or an unknown section (`--set foo.bar=1`) fails at its parent.
    below = [o for k, o in origins.items() if k.startswith(f"{key}.")]
    origin = (
        origins.get(key) or (below[0] if below else None) or (str(config_file) if config_file else "packaged default")
    )
    shown = mask_userinfo(value)
    msg = f"config error: {key} = {shown!r} (from {origin}): {_allowed(err)}"
    if shown != value:
        # The validation error holds the unmasked value: raised outside the except block, so it is
        # neither the cause nor the context of what a traceback or a log line shows.
        raise ConfigError(msg)
    raise ConfigError(msg) from failure


def _allowed(err: Any) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key (every knob is in the packaged taskzilla_sleep/data/default.yaml, see config/README.md)"
    if kind == "literal_error" and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    msg: str = str(err.get("msg", "")).removeprefix("Value error, ")
    return msg[0].lower() + msg[1:] if msg else "invalid value"
