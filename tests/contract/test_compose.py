"""docker-compose.yml and the Dockerfile, checked without a container engine.

The compose file is loaded by ops/compose-check (compose-go, the loader `docker compose` itself
uses: interpolation, normalisation and schema validation, every profile enabled), built by
`make compose-check`. What a healthcheck runs is only checked against what each image is known to
ship (see the comments in docker-compose.yml); no image is pulled or run here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.settings import load_settings
from tests.conftest import service_unavailable

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
ENV_EXAMPLE = REPO / "ops" / "taskzilla.env.example"
LOADER = REPO / "ops" / "compose-check" / "compose-check"
DUMMY_ENV = ["NEO4J_PASSWORD=x"]  # what .env must provide; nothing else is required
STORES = ("neo4j", "chroma")


def load_compose(env: list[str]) -> subprocess.CompletedProcess[str]:
    if not LOADER.exists():
        service_unavailable(f"{LOADER.relative_to(REPO)} is not built: run `make compose-check` (needs go)")
    args = [str(LOADER)]
    for pair in env:
        args += ["-env", pair]
    return subprocess.run([*args, str(COMPOSE)], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    done = load_compose(DUMMY_ENV)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = compose["services"]
    assert set(found) >= {"neo4j", "chroma", "taskzilla", "prometheus", "grafana"}
    return found


def test_every_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name, svc in services.items():
        check = svc["healthcheck"]
        assert check is not None and not check["disable"], f"{name} has no healthcheck"
        assert check["test"] and check["test"][0] in ("CMD", "CMD-SHELL"), f"{name}: {check['test']}"


def test_chroma_is_probed_with_bash_not_python(services: dict[str, Any]) -> None:
    test = services["chroma"]["healthcheck"]["test"]
    command = " ".join(test)
    # chromadb/chroma 1.x ships neither python3 nor curl nor wget.
    for missing in ("python", "curl", "wget"):
        assert missing not in command, test
    assert test[:3] == ["CMD", "/bin/bash", "-c"], test
    assert "/dev/tcp/127.0.0.1/8000" in command
    assert "GET /api/v2/heartbeat" in command
    assert "' 200 '" in command  # healthy on the status line only, not on a connect


def test_worker_waits_for_healthy_stores(services: dict[str, Any]) -> None:
    depends = services["taskzilla"]["depends_on"]
    for store in STORES:
        assert depends.get(store) == "service_healthy", depends


def test_every_published_port_is_on_loopback(services: dict[str, Any]) -> None:
    published = 0
    for name, svc in services.items():
        for port in svc["ports"]:
            assert port["host_ip"] == "127.0.0.1", f"{name} publishes {port} beyond this host"
            published += 1
    assert published >= len(services)


def test_state_lives_in_declared_named_volumes(compose: dict[str, Any], services: dict[str, Any]) -> None:
    for name, svc in services.items():
        named = [v["source"] for v in svc["volumes"] if v["type"] == "volume"]
        assert named, f"{name} keeps its state in the container"
        for source in named:
            assert source in compose["volumes"], f"{name} mounts undeclared volume {source}"


def test_worker_reads_its_config_from_a_read_only_mount(services: dict[str, Any]) -> None:
    worker = services["taskzilla"]
    config = worker["environment"].get("TASKZILLA_CONFIG")
    assert config, "TASKZILLA_CONFIG is not set for the worker"
    mounts = [v for v in worker["volumes"] if v["target"] == config]
    assert len(mounts) == 1, worker["volumes"]
    mount = mounts[0]
    assert mount["type"] == "bind" and mount["read_only"], mount
    assert Path(mount["source"]) == REPO / "config" / "local.yaml"
    assert mount["create_host_path"] is False  # missing: compose refuses, no empty directory appears


def test_the_documented_override_file_loads(tmp_path: Path) -> None:
    # docs/guides/deploy-compose.md's `cp config/example.yaml config/local.yaml`: the example is a valid override file.
    settings = load_settings(env={"TASKZILLA_CONFIG": str(REPO / "config" / "example.yaml")})
    assert settings.alerts.channels and settings.llm.model


def test_a_missing_neo4j_password_is_refused() -> None:
    done = load_compose([])
    assert done.returncode != 0
    assert "NEO4J_PASSWORD" in done.stderr


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line.removesuffix("\\").strip() + " "
        if not line.endswith("\\"):
            lines.append(pending.strip())
            pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_gives_the_non_root_user_its_data_volume() -> None:
    steps = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    kinds = [kind for kind, _ in steps]
    user = next(args for kind, args in steps if kind == "USER")
    assert user not in ("root", "0")
    volume_at = next(i for i, (kind, args) in enumerate(steps) if kind == "VOLUME" and "/data" in args)
    user_at = kinds.index("USER")
    runs = " && ".join(args for kind, args in steps[:user_at] if kind == "RUN")
    assert re.search(rf"\buseradd\b[^&]*\b{user}\b", runs), "the USER is never created"
    assert re.search(r"\bmkdir -p /data\b", runs), "/data is not created before VOLUME"
    assert re.search(rf"\bchown {user}(:{user})? /data\b", runs), f"/data is not owned by {user}"
    assert user_at < volume_at  # the chown runs as root, before USER and VOLUME


def test_env_example_names_only_variables_something_reads() -> None:
    # Every variable the example sets or mentions is read by the code, by compose or (provider
    # keys) by litellm; a TASKZILLA__SECTION__KEY line is a real setting and its value is valid.
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    lines = dict(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$", text, flags=re.M))
    assert {"NEO4J_PASSWORD", "TASKZILLA_API_TOKEN", "TASKZILLA__LLM__MODEL", "TASKZILLA__LLM__API_BASE"} <= set(lines)
    readers = "\n".join(
        p.read_text(encoding="utf-8")
        for p in [COMPOSE, REPO / "taskzilla_sleep" / "data" / "default.yaml", *REPO.glob("taskzilla_sleep/**/*.py")]
    )
    litellm_keys = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    for name, value in sorted(lines.items()):
        if name.startswith("TASKZILLA__"):
            assert value, f"{name} has no example value"
            load_settings(env={name: value})  # ConfigError: an unknown key or an invalid value
        else:
            assert name in litellm_keys or re.search(rf"\b{name}\b", readers), f"nothing reads {name}"
