"""Two processes on one store, as ops run them: run-once takes the worker's lease, the embedded
FalkorDB server is handed over when its owner stops, and a killed run is marked abandoned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.shell import as_from_a_shell
from tests.e2e.test_cli import ROOT, cli
from tests.e2e.test_worker import SAMPLE, one_call_at_a_time, stop, wait_for, worker

NIGHT = "2026-11-28T03:05:00+01:00"
INGESTED = "2026-11-27T18:00:00+01:00"


def server_env(neo4j_uri: str, chroma_address: tuple[str, int]) -> dict[str, str]:
    """Neo4j + Chroma server, wiped: the shared session servers, emptied for this test."""
    from tests.neo4j_service import servers_env

    env = servers_env(neo4j_uri, chroma_address)
    wipe = (
        "from taskzilla_sleep.core.settings import load_settings; from taskzilla_sleep.app import build;"
        "s = build(load_settings()); s.graph.delete_all(); s.vectors.delete_all(); s.close()"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | env
    subprocess.run([sys.executable, "-c", wipe], env=base, check=True, timeout=120, cwd=ROOT, capture_output=True)
    return env


@contextmanager
def run_once(data: Path, env: dict[str, str], *flags: str) -> Iterator[Any]:
    """`run-once --json` in the background; ``proc.log`` is its stderr (info-level JSON logs)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full.update(HF_HUB_OFFLINE="1", TASKZILLA_LOG_LEVEL="info", **env)
    log_path = data.parent / f"run-once-{time.monotonic_ns()}.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskzilla_sleep", "run-once", "--json", "--now", NIGHT, "--data-dir", str(data)]
            + list(flags),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=full,
            cwd=ROOT,
            preexec_fn=as_from_a_shell,
        )
        proc.log = log_path  # type: ignore[attr-defined]
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


def events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("{") and f'"event": "{name}"' in line:
            out.append(json.loads(line))
    return out


def finish(proc: Any) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, proc.log.read_text()[-3000:]
    return json.loads(out)  # type: ignore[no-any-return]


def ledger(data: Path, env: dict[str, str]) -> dict[str, dict[str, str]]:
    """run id -> step -> status, from `report --json` (attaches to whoever serves the store)."""
    res = cli("report", "--json", "--runs", "20", "--html", str(data.parent / "r.html"), data_dir=data, env=env)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    return {n["run_id"]: {s["step"]: s["status"] for s in n["steps"]} for n in json.loads(res.stdout)["nights"]}


@pytest.mark.parametrize(
    "backends", ["falkordb", pytest.param("neo4j", marks=[pytest.mark.neo4j, pytest.mark.chroma_server])]
)
def test_two_run_once_take_turns_under_the_lease(backends: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from tests.contract.test_cycle_litellm import good_model
    from tests.llm_stub import LLMStub

    env = (
        {}
        if backends == "falkordb"
        else server_env(request.getfixturevalue("neo4j_uri"), request.getfixturevalue("chroma_address"))
    )
    data = tmp_path / "d"  # one data dir for both: on FalkorDB the second attaches to the first's server
    assert cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data, env=env).returncode == 0
    with LLMStub(default=good_model, latency_s=0.3) as stub:
        env |= one_call_at_a_time(stub.url)
        with run_once(data, env) as first:
            wait_for("the first run-once to hold the lease", lambda: events(first.log, "lease_acquired"), timeout=60)
            holder = events(first.log, "lease_acquired")[0]["holder"]
            assert holder.startswith("run-once@") and f":{first.pid}:" in holder

            busy = cli("run-once", "--no-wait", "--now", NIGHT, data_dir=data, env=env)
            assert busy.returncode == 1
            assert holder in busy.stderr.strip().splitlines()[-1]
            assert first.poll() is None
            # The refused one marked nothing: the first's run is still running, not abandoned.
            (steps,) = [s for s in ledger(data, env).values() if "running" in s.values()]
            assert "abandoned" not in steps.values()

            with run_once(data, env) as second:
                wait_for("the second to wait", lambda: "waiting for the consolidation lease" in second.log.read_text())
                told = [ln for ln in second.log.read_text().splitlines() if ln.startswith("taskzilla-sleep: waiting")]
                assert len(told) == 1 and f"held by {holder}" in told[0]
                one = finish(first)
                two = finish(second)
    calls = [sum(s["llm_calls"] for s in run["steps"]) for run in (one, two)]
    assert calls[0] > 0 and calls[1] == 0  # the night's calls are made once
    assert len(stub.calls) == calls[0]
    assert all(s["status"] == "ok" for run in (one, two) for s in run["steps"])
    assert not any(s.get("patterns_added") for s in two["steps"] if s["step"] == "distill" for s in [s["counts"]])
    if backends == "falkordb":
        # The first stopped its server on exit; the second, attached to it, started the next one.
        assert events(second.log, "falkordb_handed_over")
    assert not [r for r, s in ledger(data, env).items() if "running" in s.values()]


def test_a_second_worker_on_one_data_dir_survives_the_owner_stopping(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data).returncode == 0
    with worker(data, "2026-11-28T12:00:00+01:00", speed=1) as owner, worker(data, "2026-11-28T12:00:00+01:00", 1) as b:
        assert b.tz.ready().ready is True
        from taskzilla_sleep.runtime.presence import live_workers

        assert sorted(w["pid"] for w in live_workers(data)) == sorted([owner.pid, b.pid])  # one file each
        assert stop(owner) == 0
        assert [w["pid"] for w in live_workers(data)] == [b.pid]  # the stopped one's file went with it
        # b's next call finds the server gone, starts one on the same files and goes on.
        assert b.tz.status()["sizes"]["episodes_total"] > 0
        assert b.tz.ready().ready is True
        assert b.poll() is None
        assert stop(b) == 0
    assert '"event": "falkordb_handed_over"' in b.log_path.read_text()
    assert cli("reconcile", "--check", data_dir=data).returncode == 0


def test_a_run_killed_mid_way_is_marked_abandoned_at_the_next_start(tmp_path: Path) -> None:
    data = tmp_path / "d"
    ttl = {"TASKZILLA__WORKER__LEASE_TTL_S": "5"}  # the dead run's lease expires after this
    assert cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data).returncode == 0
    killed = cli("run-once", "--now", NIGHT, data_dir=data, env=ttl | {"TASKZILLA_CRASH_AT": "pipeline.after_distill"})
    assert killed.returncode == -9
    (run_id,) = ledger(data, {})
    assert ledger(data, {})[run_id]["distill"] == "running"  # what kill -9 leaves behind

    again = cli("run-once", "--steps", "prune", "--now", NIGHT, data_dir=data, env=ttl)
    assert again.returncode == 0, again.stderr[-2000:]
    assert ledger(data, {})[run_id] == {"prune": "ok", "distill": "abandoned", "reflect": "skipped", "decay": "skipped"}
    nights = json.loads(cli("report", "--json", "--html", str(tmp_path / "r.html"), data_dir=data).stdout)["nights"]
    (left,) = [n for n in nights if n["run_id"] == run_id]
    assert "stopped before the step finished" in next(s["error"] for s in left["steps"] if s["step"] == "distill")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_releases_the_lease_and_records_the_step(sig: signal.Signals, tmp_path: Path) -> None:
    from tests.contract.test_cycle_litellm import good_model
    from tests.llm_stub import LLMStub

    data = tmp_path / "d"
    assert cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data).returncode == 0
    with LLMStub(default=good_model, latency_s=0.5) as stub:
        env = one_call_at_a_time(stub.url)
        with run_once(data, env) as first:
            wait_for("a model call mid-distill", lambda: len(stub.calls) >= 2, timeout=60)
            first.send_signal(sig)
            first.communicate(timeout=60)
            assert first.returncode == 130, first.log.read_text()[-2000:]
        log = first.log.read_text()  # what was finished and what was left, and that a rerun repairs it
        assert "taskzilla-sleep: run-once interrupted during distill: finished steps: prune; left: distill, " in log
        assert "Re-run the same command to finish" in log
        # Released at once: the next run does not wait for the lease to expire.
        (steps,) = ledger(data, {}).values()
        assert steps["distill"] == "abandoned"
        nxt = cli("run-once", "--no-wait", "--steps", "prune", "--now", NIGHT, data_dir=data)
        assert nxt.returncode == 0, nxt.stderr[-2000:]
