"""The worker's image, built from the repo's Dockerfile and run with podman as an operator runs it:
the default embedded stores on a named volume at /data, the API published on 127.0.0.1, the
image's non-root user. ops/container/build.sh makes the image (a local Debian base: no registry is
needed) and is cached: a rerun without changes takes seconds, the first build minutes.

`make container` runs this (with TASKZILLA_REQUIRE_SERVICES=1); `make test` and `make e2e` leave
it out (`-m "not container"`). Without podman, or when the image cannot be built here, it skips,
or fails under TASKZILLA_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taskzilla_sleep import __version__
from tests.conftest import service_unavailable
from tests.contract.test_compose import DUMMY_ENV, load_compose
from tests.http_receiver import free_port

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "ops" / "container" / "build.sh"
IMAGE = "localhost/taskzilla-sleep:local"
UID = 10001  # the Dockerfile's `useradd --uid`
GRACE_S = 60  # docker-compose.yml's stop_grace_period
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "ops" / "container" / "containers.conf")}


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}"
    return done


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("podman") is None:
        service_unavailable("podman is not installed: `make container` installs it (Debian's podman and runc)")
    env = {**ENV, "TASKZILLA_IMAGE": IMAGE}
    done = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=1500, env=env, check=False)
    if done.returncode != 0:
        service_unavailable(f"ops/container/build.sh could not build {IMAGE}: {done.stderr[-3000:]}")
    runs = podman("run", "--rm", "--entrypoint", "true", IMAGE, check=False)
    if runs.returncode != 0:
        service_unavailable(f"podman cannot run a container here (exit {runs.returncode}): {runs.stderr[-2000:]}")
    return IMAGE


@pytest.fixture
def volume() -> Iterator[str]:
    name = f"taskzilla-test-{uuid.uuid4().hex[:12]}"
    podman("volume", "create", name)
    try:
        yield name
    finally:
        podman("volume", "rm", "--force", name, check=False)


def test_the_image_runs_the_cli(image: str) -> None:
    done = podman("run", "--rm", image, "--version")
    assert done.stdout.strip() == f"taskzilla-sleep {__version__}"


def _ready(base: str, name: str) -> None:
    """/healthz and /readyz answer 200; the container's log when it stops or never gets there."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
        if state != "running":
            pytest.fail(f"the container is {state}: {podman('logs', name).stderr[-3000:]}")
        try:
            if all(httpx.get(base + path, timeout=5).status_code == 200 for path in ("/healthz", "/readyz")):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail(f"/healthz and /readyz not both 200 within 120 s: {podman('logs', name).stderr[-3000:]}")


def test_the_worker_container_serves_writes_its_volume_as_its_user_and_stops(image: str, volume: str) -> None:
    port = free_port()
    name = f"taskzilla-test-{uuid.uuid4().hex[:12]}"
    podman(
        "run", "--detach", "--name", name,
        "--publish", f"127.0.0.1:{port}:8765",
        "--volume", f"{volume}:/data",
        "--env", "TASKZILLA__API__HOST=0.0.0.0",  # inside the container; published on loopback only
        image,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _ready(base, name)
        ready = httpx.get(base + "/readyz", timeout=5).json()
        assert (ready["ready"], ready["problems"]) == (True, {})
        assert ready["model"]["ok"] is True and ready["model"]["model"] is None  # the offline provider

        metrics = httpx.get(base + "/metrics", timeout=10)
        assert metrics.status_code == 200
        assert f'taskzilla_sleep_build_info{{version="{__version__}"}} 1.0' in metrics.text

        # The image's user, not root; the data it writes on the volume is that user's.
        assert podman("exec", name, "id", "-u").stdout.strip() == str(UID)
        data = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume).stdout.strip())
        [presence] = data.glob("worker-*.json")
        assert presence.stat().st_uid == UID
        assert json.loads(presence.read_text())["api"] == "http://0.0.0.0:8765"
        assert (data / "falkordb").stat().st_uid == UID and (data / "chroma").stat().st_uid == UID

        # docker-compose.yml's healthcheck of the worker (as compose-go loads it) passes in the image.
        check = json.loads(load_compose(DUMMY_ENV).stdout)["services"]["taskzilla"]["healthcheck"]["test"]
        assert check[0] == "CMD"
        healthy = podman("exec", name, *check[1:], check=False)
        assert healthy.returncode == 0, healthy.stderr

        status = podman("exec", name, "taskzilla-sleep", "status")
        assert "graph:    falkordb (/data/falkordb) ok" in status.stdout, status.stdout
        assert "vectors:  chroma-embedded (/data/chroma) ok" in status.stdout, status.stdout

        # SIGTERM (podman stop): a clean exit well within the grace, the presence file withdrawn.
        started = time.monotonic()
        podman("stop", "--time", str(GRACE_S), name, timeout=GRACE_S + 30)
        took = time.monotonic() - started
        exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        assert exit_code == "0", podman("logs", name).stderr[-3000:]
        assert took < GRACE_S
        assert not list(data.glob("worker-*.json"))
        assert (data / "falkordb").is_dir()  # the data stays on the volume
    finally:
        podman("rm", "--force", "--time", "0", name, check=False)
