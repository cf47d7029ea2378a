"""Issue 27 item 8, with real processes on both backend pairs: a CLI `ingest` that has written the graph
and is still writing vectors is not drift to a `reconcile` in another process (`--check`, or the one
`run-once` and the worker run before a night), while a vector deleted by hand still is; an ingest
killed with SIGKILL hides nothing.

The ingest is held after its first batch of vectors (``faults.pausepoint``), so the other process
looks exactly inside the window where, before ingests announced themselves, 5 of 6 worker reconciles
logged ``drift_found … repaired=N`` and fired the drift alert while ``reconcile --check`` found none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.memory.ingest import EMBED_BATCH
from tests.e2e.test_cli import ROOT, cli
from tests.e2e.test_concurrency import events, run_once, server_env
from tests.e2e.test_worker import wait_for, worker

BIG = EMBED_BATCH + 40  # two batches of vectors: held after the first, the second still to come
INGESTED = "2026-11-28T10:00:00+01:00"
BACKENDS = ["falkordb", pytest.param("neo4j", marks=[pytest.mark.neo4j, pytest.mark.chroma_server])]


def jsonl(path: Path, n: int, prefix: str, team: str = "platform") -> Path:
    rows = [
        {
            "id": f"{prefix}-{i:05d}",
            "team": team,
            "channel": f"c{i % 5}",
            "author": f"person{i % 11}",
            "text": f"{prefix} {i}: service {i % 17} deploys on the {i % 28 + 1}th, ask person{i % 3} first",
            "ts": f"2026-11-28T09:{i % 60:02d}:00+01:00",
            "provenance": "human",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def backend_env(backends: str, request: pytest.FixtureRequest) -> dict[str, str]:
    if backends == "falkordb":
        return {}
    return server_env(request.getfixturevalue("neo4j_uri"), request.getfixturevalue("chroma_address"))


@contextmanager
def held_ingest(
    data: Path, env: dict[str, str], source: Path, now: str | None = INGESTED
) -> Iterator[tuple[Any, Path]]:
    """`ingest SOURCE` in the background, held after its first batch of vectors until the gate goes
    (``now``: its ingest clock; None: the wall clock)."""
    gate = data.parent / f"gate-{time.monotonic_ns()}"
    gate.touch()
    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full.update(HF_HUB_OFFLINE="1", TASKZILLA_LOG_LEVEL="info", **env)
    full.update(TASKZILLA_PAUSE_AT="ingest.after_vector_batch", TASKZILLA_PAUSE_FILE=str(gate))
    log = (data.parent / f"ingest-{time.monotonic_ns()}.log").open("w")
    cmd = [sys.executable, "-m", "taskzilla_sleep", "ingest", str(source), "--json", *(["--now", now] if now else [])]
    proc = subprocess.Popen(
        [*cmd, "--data-dir", str(data)], stdout=subprocess.PIPE, stderr=log, text=True, env=full, cwd=ROOT
    )
    proc.log = Path(log.name)  # type: ignore[attr-defined]
    try:
        reached = Path(f"{gate}.reached")
        wait_for("the ingest to hold after its first batch of vectors", lambda: reached.exists() or proc.poll(), 180)
        assert proc.poll() is None, proc.log.read_text()[-3000:]  # type: ignore[attr-defined]
        yield proc, gate
    finally:
        gate.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.wait(timeout=180)
        log.close()


def check(data: Path, env: dict[str, str], *flags: str) -> tuple[int, dict[str, Any]]:
    res = cli("reconcile", "--json", *flags, data_dir=data, env=env)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    return res.returncode, json.loads(res.stdout)


def delete_vector(data: Path, env: dict[str, str], team: str, eid: str) -> None:
    """A vector deleted behind the product's back, by another program on the same stores."""
    code = (
        "import sys; from taskzilla_sleep.core.settings import load_settings; from taskzilla_sleep.app import build\n"
        "with build(load_settings()) as s: s.vectors.delete(sys.argv[1], 'episodes', [sys.argv[2]])"
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full.update(HF_HUB_OFFLINE="1", TASKZILLA_DATA_DIR=str(data), **env)
    subprocess.run([sys.executable, "-c", code, team, eid], env=full, cwd=ROOT, check=True, timeout=120)


@pytest.mark.parametrize("backends", BACKENDS)
def test_a_reconcile_in_another_process_sees_no_drift_in_an_ingest_in_flight(
    backends: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = backend_env(backends, request)
    data = tmp_path / "d"
    assert cli("ingest", str(jsonl(tmp_path / "old.jsonl", 5, "old")), data_dir=data, env=env).returncode == 0
    with held_ingest(data, env, jsonl(tmp_path / "big.jsonl", BIG, "big")) as (ingest, gate):
        code, got = check(data, env, "--check")
        assert (code, got["drift"]) == (0, 0), got  # before ingests announced themselves: BIG - EMBED_BATCH missing
        assert got["in_flight"] == BIG - EMBED_BATCH, got

        delete_vector(data, env, "platform", "old-00002")  # real drift, during the ingest
        code, got = check(data, env, "--check")
        assert (code, got["drift"]) == (1, 1), got
        assert got["by_team"]["platform"]["episodes"]["missing_vectors"] == 1
        assert got["in_flight"] == BIG - EMBED_BATCH, got

        # The reconcile before a night (run-once's, the worker's): it repairs the real drift only.
        with run_once(data, env, "--steps", "prune") as night:
            out, _ = night.communicate(timeout=240)
            assert night.returncode == 0, night.log.read_text()[-3000:]
        drift = events(night.log, "drift_found")
        assert [(d["team"], d["missing_vectors"], d["repaired"]) for d in drift] == [("platform", 1, 1)]
        (skipped,) = events(night.log, "drift_in_flight_skipped")
        assert skipped["episodes"] == BIG - EMBED_BATCH
        assert ingest.poll() is None  # still held: all of that happened mid-ingest
        gate.unlink()
        out, _ = ingest.communicate(timeout=240)
        assert ingest.returncode == 0 and json.loads(out)["new"] == BIG, ingest.log.read_text()[-3000:]

    code, got = check(data, env, "--check")
    assert (code, got["drift"], got["in_flight"]) == (0, 0, 0), got


@pytest.mark.parametrize("backends", BACKENDS)
def test_an_ingest_killed_mid_way_hides_no_drift(backends: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = backend_env(backends, request)
    data = tmp_path / "d"
    source = jsonl(tmp_path / "crash.jsonl", 40, "crash")
    killed = cli("ingest", str(source), data_dir=data, env=env | {"TASKZILLA_CRASH_AT": "ingest.after_graph"})
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL right after the graph write
    # Its mark still claims to run for worker.lease_ttl_s, but its process is gone: drift at once.
    code, got = check(data, env, "--check")
    assert (code, got["drift"], got["in_flight"]) == (1, 40, 0), got
    code, got = check(data, env)
    assert sum(c["episodes"]["repaired"] for c in got["by_team"].values()) == 40
    assert check(data, env, "--check")[1]["drift"] == 0


def test_the_workers_reconcile_logs_no_drift_and_fires_no_alert_for_a_cli_ingest(tmp_path: Path) -> None:
    """The report of issue 27: a worker whose watchdog runs (and reconciles its team first) while a
    CLI ingest into the same stores is between its graph write and its last vector."""
    data = tmp_path / "d"
    old = jsonl(tmp_path / "old.jsonl", 5, "old")
    assert cli("ingest", str(old), "--now", "2026-11-28T08:00:00+01:00", data_dir=data).returncode == 0
    with worker(data, "2026-11-28T10:30:00+01:00", speed=60) as w:
        # Ingested by the wall clock, ahead of the worker's: new to its watchdog, due at its next poll.
        with held_ingest(data, {}, jsonl(tmp_path / "big.jsonl", BIG, "big"), now=None) as (ingest, gate):
            passes = lambda: events(w.log_path, "watchdog_finished")  # noqa: E731
            wait_for("a watchdog pass over the team", passes, timeout=120)
            assert ingest.poll() is None  # it reconciled the team while the ingest was held
            gate.unlink()
            assert ingest.wait(timeout=240) == 0
        assert [e["team"] for e in events(w.log_path, "watchdog_triggered")] == ["platform"]
        assert events(w.log_path, "drift_found") == []
        # Its graph write done, its vectors still coming (the pass may have come before the first batch).
        (skipped,) = events(w.log_path, "drift_in_flight_skipped")
        assert skipped["team"] == "platform" and BIG - EMBED_BATCH <= skipped["episodes"] <= BIG
        assert "taskzilla_sleep_drift_items_total 0.0" in w.tz.metrics()
    assert check(data, {}, "--check")[1]["drift"] == 0
