from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from taskzilla_sleep.core.errors import ConfigError
from taskzilla_sleep.core.settings import REMOVED, Secrets, Settings, load_settings, packaged_default_yaml

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_the_seed_values(tmp_path: Path) -> None:
    s = load_settings(env={"XDG_DATA_HOME": str(tmp_path)})
    assert s.distill.min_episodes == 3
    assert s.distill.confidence_floor == 0.80
    assert s.decay.grace_hours == 72
    assert (s.watchdog.episode_threshold, s.watchdog.cooldown_minutes, s.watchdog.lookback_hours) == (3, 30, 2)
    assert s.reflect.stale_after_days == 90
    assert (s.schedule.prune, s.schedule.distill, s.schedule.reflect, s.schedule.decay) == (
        time(3, 5),
        time(3, 10),
        time(3, 15),
        time(3, 25),
    )
    assert s.schedule.timezone == "Europe/Amsterdam"
    assert (s.memory_index.max_entries, s.memory_index.max_chars) == (50, 150)
    assert s.data_dir == tmp_path / "taskzilla-sleep"
    assert s.graph.backend == "falkordb" and s.vector.backend == "chroma-embedded"


def test_the_packaged_default_lists_every_section_and_knob() -> None:
    """default.yaml is the one place a user reads every knob: each section and key of Settings is in it
    (the data dir, whose default depends on the machine, as a comment)."""
    tree = yaml.safe_load(packaged_default_yaml())
    sections = {name for name in Settings.model_fields if name not in ("data_dir", "config_files")}
    assert set(tree) == sections
    for name in sections:
        section = Settings.model_fields[name].annotation
        assert isinstance(section, type) and issubclass(section, BaseModel)
        assert set(tree[name]) == set(section.model_fields), name
    assert "# data_dir:" in packaged_default_yaml()


def test_the_example_override_file_loads(tmp_path: Path) -> None:
    s = load_settings(ROOT / "config" / "example.yaml", env={"XDG_DATA_HOME": str(tmp_path)})
    assert s.graph.backend == "neo4j" and s.distill.confidence_floor == 0.80  # the rest keeps its default


def test_precedence_yaml_then_env_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("distill:\n  confidence_floor: 0.7\n  min_episodes: 4\nwatchdog:\n  cooldown_minutes: 10\n")
    env = {"TASKZILLA__DISTILL__CONFIDENCE_FLOOR": "0.75", "TASKZILLA__WATCHDOG__COOLDOWN_MINUTES": "20"}
    s = load_settings(cfg, env=env, overrides={"watchdog.cooldown_minutes": 5})
    assert s.distill.min_episodes == 4  # yaml
    assert s.distill.confidence_floor == 0.75  # env beats yaml
    assert s.watchdog.cooldown_minutes == 5  # flag beats env
    assert str(cfg) in s.config_files


def test_config_env_var_and_data_dir_env(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("graph:\n  backend: neo4j\n")
    s = load_settings(env={"TASKZILLA_CONFIG": str(cfg), "TASKZILLA_DATA_DIR": str(tmp_path / "d")})
    assert s.graph.backend == "neo4j"
    assert s.data_dir == tmp_path / "d"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TASKZILLA__GRAPH__BACKEND": "mongo"}, "graph.backend = 'mongo' (from TASKZILLA__GRAPH__BACKEND)"),
        ({"TASKZILLA__DISTILL__CONFIDENCE_FLOOR": "1.5"}, "distill.confidence_floor = 1.5"),
        ({"TASKZILLA__SCHEDULE__TIMEZONE": "Mars/Olympus"}, "unknown IANA time zone"),
        (
            {"TASKZILLA__DECAY__GRACE_HOURZ": "3"},
            "unknown setting `decay.grace_hourz` (from TASKZILLA__DECAY__GRACE_HOURZ) — did you mean "
            "`decay.grace_hours` (TASKZILLA__DECAY__GRACE_HOURS)?",
        ),
    ],
)
def test_invalid_value_is_one_line_naming_key_value_and_allowed(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env=env)
    msg = str(info.value)
    assert expected in msg
    assert "\n" not in msg
    assert info.value.exit_code == 2


def test_literal_error_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"must be one of 'falkordb' or 'neo4j'"):
        load_settings(env={"TASKZILLA__GRAPH__BACKEND": "mongo"})


def test_bad_yaml_names_file_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("graph:\n  backend: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: not valid YAML"):
        load_settings(cfg, env={})


def test_bad_regex_in_write_discipline_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ingest.write_discipline.x.patterns"):
        load_settings(env={}, overrides={"ingest.write_discipline": {"x": {"patterns": ["(unclosed"]}}})


def test_secrets_only_from_env_and_never_in_repr() -> None:
    sec = Secrets.from_env({"TASKZILLA_NEO4J_PASSWORD": "hunter2-very-secret"})
    assert sec.neo4j_password is not None
    assert sec.neo4j_password.get_secret_value() == "hunter2-very-secret"
    assert "hunter2" not in repr(sec) and "hunter2" not in str(sec.model_dump())
    s = load_settings(env={"TASKZILLA_NEO4J_PASSWORD": "hunter2-very-secret"})
    assert "hunter2" not in s.model_dump_json()


def _chain(exc: BaseException | None) -> str:
    """Everything a traceback or a logged exception would show: the error and all its causes."""
    out = []
    while exc is not None:
        out.append(f"{exc!r} {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(out)


@pytest.mark.parametrize("uri", ["bolt://neo4j:hunter2-secret@db:7687", "neo4j+s://:hunter2-secret@db", "bolt://u@db"])
def test_userinfo_in_the_neo4j_uri_is_refused_and_masked(tmp_path: Path, uri: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"graph:\n  neo4j_uri: '{uri}'\n")
    for kwargs in ({"env": {"TASKZILLA__GRAPH__NEO4J_URI": uri}}, {"config_file": cfg, "env": {}}):
        with pytest.raises(ConfigError) as info:
            load_settings(**kwargs)  # type: ignore[arg-type]
        msg = str(info.value)
        assert "graph.neo4j_uri = '" in msg and "***@db" in msg and "TASKZILLA_NEO4J_PASSWORD" in msg
        assert "\n" not in msg and info.value.exit_code == 2
        assert "hunter2" not in _chain(info.value)


@pytest.mark.parametrize("scheme", ["neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"])
def test_every_driver_scheme_is_accepted(scheme: str) -> None:
    uri = f"{scheme}://db.example.com:7687"
    assert load_settings(env={"TASKZILLA__GRAPH__NEO4J_URI": uri}).graph.neo4j_uri == uri


@pytest.mark.parametrize(
    "uri", ["http://127.0.0.1:7474", "https://db", "db:7687", "bolt+x://db", "bolt://", "bolt://h:1e9"]
)
def test_a_neo4j_uri_the_driver_cannot_use_is_a_config_error(uri: str) -> None:
    with pytest.raises(ConfigError, match=r"graph\.neo4j_uri = ") as info:
        load_settings(env={"TASKZILLA__GRAPH__NEO4J_URI": uri})
    if "://" in uri and not uri.startswith("bolt"):
        assert "neo4j, neo4j+s, neo4j+ssc, bolt, bolt+s, bolt+ssc" in str(info.value)


def test_a_config_file_that_is_not_utf8_names_the_file_and_byte(tmp_path: Path) -> None:
    cfg = tmp_path / "latin1.yaml"
    cfg.write_bytes(b"distill:\n  min_episodes: 3  # \xe9\n")
    with pytest.raises(ConfigError, match=rf"{cfg}: not UTF-8 text \(invalid continuation byte at byte 30\)") as info:
        load_settings(cfg, env={})
    assert info.value.exit_code == 2


def test_config_nested_too_deeply_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "deep.yaml"
    cfg.write_text("x: " + "[" * 50_000 + "]" * 50_000)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_settings(cfg, env={})
    # In an env value the same text is just a string that validation names.
    with pytest.raises(ConfigError, match=r"graph\.backend = '\[\[\["):
        load_settings(env={"TASKZILLA__GRAPH__BACKEND": "[" * 50_000 + "]" * 50_000})


@pytest.mark.parametrize("host", ["http://chroma", "chroma:8000/x", "u:p@chroma", "a b", ""])
def test_a_host_must_be_a_plain_host_name(host: str) -> None:
    with pytest.raises(ConfigError, match="must be a host name or IP address only") as info:
        load_settings(env={"TASKZILLA__VECTOR__HOST": host})
    assert "u:p@" not in str(info.value)
    assert load_settings(env={"TASKZILLA__VECTOR__HOST": "chroma.internal"}).vector.host == "chroma.internal"


def test_a_blank_optional_setting_means_not_set() -> None:
    s = load_settings(
        env={"TASKZILLA__LLM__MODEL": "", "TASKZILLA__LLM__API_BASE": " ", "TASKZILLA__MEMORY_INDEX__DIR": ""}
    )
    assert (s.llm.model, s.llm.api_base, s.memory_index.dir) == (None, None, None)
    assert s.memory_dir == s.data_dir / "memory"  # not the current directory


def test_a_key_below_a_scalar_or_an_unknown_section_names_where_it_came_from() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting `foo` \(from command line\): no such key"):
        load_settings(env={}, overrides={"foo.bar": 1})
    with pytest.raises(ConfigError, match=r"graph\.backend = \{'x': 1\} \(from TASKZILLA__GRAPH__BACKEND__X\)"):
        load_settings(env={"TASKZILLA__GRAPH__BACKEND__X": "1"})


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("set", "unknown setting `graph.neo4j_url` (from command line) — did you mean `graph.neo4j_uri`?"),
        (
            "env",
            "unknown setting `graph.neo4j_url` (from TASKZILLA__GRAPH__NEO4J_URL) — did you mean "
            "`graph.neo4j_uri` (TASKZILLA__GRAPH__NEO4J_URI)?",
        ),
        ("yaml", "unknown setting `graph.neo4j_url` (from {path}:3) — did you mean `graph.neo4j_uri`?"),
    ],
)
def test_an_unknown_setting_suggests_the_nearest_key_wherever_it_was_set(
    tmp_path: Path, how: str, expected: str
) -> None:
    path = tmp_path / "taskzilla.yaml"
    path.write_text("graph:\n  backend: neo4j\n  neo4j_url: bolt://secret-host:7687\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        if how == "set":
            load_settings(env={}, overrides={"graph.neo4j_url": "bolt://secret-host:7687"})
        elif how == "env":
            load_settings(env={"TASKZILLA__GRAPH__NEO4J_URL": "bolt://secret-host:7687"})
        else:
            load_settings(config_file=path, env={})
    assert str(info.value) == "config error: " + expected.format(path=path)
    assert "secret-host" not in str(info.value)  # the value of a misplaced key is not echoed


def test_a_misspelled_section_and_a_new_vector_key_are_suggested_too() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting `vectr` \(from command line\) — did you mean `vector`\?"):
        load_settings(env={}, overrides={"vectr.tenant": "acme"})
    with pytest.raises(ConfigError, match=r"did you mean `vector.database`\?"):
        load_settings(env={}, overrides={"vector.databse": "memory"})


def test_a_credential_in_vector_headers_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"vector.headers.*TASKZILLA_CHROMA_TOKEN") as info:
        load_settings(env={}, overrides={"vector.headers": {"X-Chroma-Token": "s3cret"}})
    assert "s3cret" not in str(info.value) and "'X-Chroma-Token': '***'" in str(info.value)
    s = load_settings(env={}, overrides={"vector.headers": {"X-Team-Proxy": "memory"}, "vector.tenant": "acme"})
    assert (s.vector.headers, s.vector.tenant, s.vector.database) == (
        {"X-Team-Proxy": "memory"},
        "acme",
        "default_database",
    )


@pytest.mark.parametrize(
    ("how", "origin"),
    [("yaml", "{path}:3"), ("env", "TASKZILLA__GRAPH__BATCH_SIZE"), ("set", "command line")],
)
def test_a_dropped_knob_is_refused_naming_it_and_its_fixed_value(tmp_path: Path, how: str, origin: str) -> None:
    path = tmp_path / "taskzilla.yaml"
    path.write_text("graph:\n  backend: falkordb\n  batch_size: 200\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        if how == "yaml":
            load_settings(config_file=path, env={})
        elif how == "env":
            load_settings(env={"TASKZILLA__GRAPH__BATCH_SIZE": "200"})
        else:
            load_settings(env={}, overrides={"graph.batch_size": 200})
    assert str(info.value) == (
        f"config error: `graph.batch_size` (from {origin.format(path=path)}) is no longer a setting: "
        f"{REMOVED['graph.batch_size']}; remove it from there"
    )


def test_every_dropped_knob_is_gone_from_the_model_and_names_the_constant_it_became() -> None:
    from taskzilla_sleep.rules.policies import TOPIC_BONUS, VALUE_BONUS
    from taskzilla_sleep.stores.cypher.base import WRITE_BATCH

    constants = {
        "graph.batch_size": WRITE_BATCH,
        "distill.topic_bonus": TOPIC_BONUS,
        "distill.value_bonus": VALUE_BONUS,
    }
    assert set(REMOVED) == set(constants)
    defaults = yaml.safe_load(packaged_default_yaml())
    for key, value in constants.items():
        section, name = key.split(".")
        model = Settings.model_fields[section].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel) and name not in model.model_fields
        assert name not in defaults[section]
        assert f"fixed at {value}" in REMOVED[key]
        with pytest.raises(ConfigError, match=f"`{key}` .* is no longer a setting"):
            load_settings(env={}, overrides={key: value})
