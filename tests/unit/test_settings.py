from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest

from taskzilla_sleep.errors import ConfigError
from taskzilla_sleep.settings import Secrets, load_settings, packaged_default_yaml

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


def test_repo_config_is_the_packaged_default() -> None:
    assert (ROOT / "config" / "taskzilla.yaml").read_text(encoding="utf-8") == packaged_default_yaml()


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
            "decay.grace_hourz = 3 (from TASKZILLA__DECAY__GRACE_HOURZ): unknown key",
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
