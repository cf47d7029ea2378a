"""One typed Settings object: YAML (the packaged data/default.yaml < --config FILE) < env < command-line flags.

Env overrides use ``TASKZILLA__SECTION__KEY`` (e.g. ``TASKZILLA__GRAPH__BACKEND=neo4j``).
Secrets are read from the environment only (see :class:`Secrets`) and are never part of the
settings that get printed or logged.
"""

from __future__ import annotations

import difflib
import os
import typing
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from taskzilla_sleep.core.errors import ConfigError
from taskzilla_sleep.core.settings.sections import (
    _USERINFO,
    ENV_PREFIX,
    NEO4J_SCHEMES,
    AlertChannel,
    AlertSettings,
    ApiSettings,
    ConnectorRule,
    DecaySettings,
    DistillSettings,
    EmbeddingSettings,
    GraphSettings,
    IngestSettings,
    LLMSettings,
    MemoryIndexSettings,
    MetricsSettings,
    NightBudget,
    PruneSettings,
    RecallSettings,
    ReflectSettings,
    ScheduleSettings,
    TokenGrant,
    VectorSettings,
    WatchdogSettings,
    WorkerSettings,
    _Section,
)
from taskzilla_sleep.core.settings.similarity import FINDING, convert, scale_of

__all__ = [
    "ENV_PREFIX",
    "NEO4J_SCHEMES",
    "REMOVED",
    "AlertChannel",
    "AlertSettings",
    "ApiSettings",
    "ConnectorRule",
    "DecaySettings",
    "DistillSettings",
    "EmbeddingSettings",
    "GraphSettings",
    "IngestSettings",
    "LLMSettings",
    "MemoryIndexSettings",
    "MetricsSettings",
    "NightBudget",
    "PruneSettings",
    "RecallSettings",
    "ReflectSettings",
    "ScheduleSettings",
    "Secrets",
    "Settings",
    "TokenGrant",
    "VectorSettings",
    "WatchdogSettings",
    "WorkerSettings",
    "default_data_dir",
    "load_settings",
    "mask_userinfo",
    "packaged_default_yaml",
    "parse_scalar",
]


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
    recall: RecallSettings = RecallSettings()
    watchdog: WatchdogSettings = WatchdogSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    memory_index: MemoryIndexSettings = MemoryIndexSettings()
    api: ApiSettings = ApiSettings()
    alerts: AlertSettings = AlertSettings()
    worker: WorkerSettings = WorkerSettings()
    metrics: MetricsSettings = MetricsSettings()
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
        return on_scale(Settings.model_validate(tree))
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
    if err.get("type") == "extra_forbidden":
        # An unknown key: its value does not matter (and may be a secret put in the wrong place).
        if config_file is not None and origin == str(config_file) and (line := _yaml_line(config_file, err["loc"])):
            origin = f"{config_file}:{line}"
        if key in REMOVED:
            raise ConfigError(
                f"config error: `{key}` (from {origin}) is no longer a setting: {REMOVED[key]}; remove it from there"
            )
        raise ConfigError(f"config error: unknown setting `{key}` (from {origin}){_did_you_mean(err['loc'], origin)}")
    shown = mask_userinfo(value)
    if key.startswith(HIDDEN_VALUES) and isinstance(value, dict):
        shown = dict.fromkeys(value, "***")  # a credential put there by mistake is not echoed
    msg = f"config error: {key} = {shown!r} (from {origin}): {_allowed(err)}"
    if shown != value:
        # The validation error holds the unmasked value: raised outside the except block, so it is
        # neither the cause nor the context of what a traceback or a log line shows.
        raise ConfigError(msg)
    raise ConfigError(msg) from failure


def on_scale(settings: Settings) -> Settings:
    """``settings`` with every threshold that finds candidates converted to its embedder's scale."""
    scale = scale_of(settings.embeddings.provider)
    if scale is None:
        return settings
    sections: dict[str, dict[str, float]] = {}
    for section, name in FINDING:
        sections.setdefault(section, {})[name] = convert(getattr(getattr(settings, section), name), scale)
    update = {s: getattr(settings, s).model_copy(update=fields) for s, fields in sections.items()}
    return settings.model_copy(update=update)


HIDDEN_VALUES = ("vector.headers",)  # settings whose values an error shows as *** (headers may carry a token)

# Knobs that were dropped (internal constants no operator should turn) -> what they are now. A file,
# env var or flag still setting one is refused (exit 2) with this instead of "unknown setting" and a
# guess at a near key: the operator learns the value is fixed and what it is.
REMOVED = {
    "graph.batch_size": "the rows per graph write are fixed at 500",
    "distill.topic_bonus": "the grouping's topic-word bonus is fixed at 0.05 (docs/concepts/judgement.md)",
    "distill.value_bonus": "the grouping's same-value bonus is fixed at 0.15 (docs/concepts/judgement.md)",
}


def _known_keys(loc: Sequence[Any]) -> list[str]:
    """The keys allowed beside the last one of ``loc`` (a path in Settings; a channel's name is any)."""
    model: Any = Settings
    for part in loc[:-1]:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            model = field.annotation if field is not None else None
        elif typing.get_origin(model) is dict:
            model = typing.get_args(model)[1]  # a mapping by name (alerts.channels.NAME)
        else:
            return []
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _did_you_mean(loc: Sequence[Any], origin: str) -> str:
    """ " — did you mean `graph.neo4j_uri`?" for the closest allowed key (in env form when it came from env)."""
    near = difflib.get_close_matches(str(loc[-1]), _known_keys(loc), n=1, cutoff=0.6)
    if not near:
        return ": no such key (every knob is in the packaged taskzilla_sleep/data/default.yaml, see config/README.md)"
    dotted = ".".join([*(str(p) for p in loc[:-1]), near[0]])
    if origin.startswith(ENV_PREFIX):
        return f" — did you mean `{dotted}` ({ENV_PREFIX}{dotted.upper().replace('.', '__')})?"
    return f" — did you mean `{dotted}`?"


def _yaml_line(path: Path, loc: Sequence[Any]) -> int | None:
    """The line of the key at ``loc`` in the YAML file ``path`` (1-based), or None."""
    try:
        node: Any = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    line = None
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)]
        if not found:
            return None
        line, node = found[-1][0].start_mark.line + 1, found[-1][1]
    return line


def _allowed(err: Any) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key (every knob is in the packaged taskzilla_sleep/data/default.yaml, see config/README.md)"
    if kind == "literal_error" and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    msg: str = str(err.get("msg", "")).removeprefix("Value error, ")
    return msg[0].lower() + msg[1:] if msg else "invalid value"
