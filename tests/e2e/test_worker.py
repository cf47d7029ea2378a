"""`taskzilla-sleep worker` as a subprocess with a controlled clock, as ops run it; its API called
with the package's client (``proc.tz``), as a Python bot calls it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.client import ApiError, Client
from taskzilla_sleep.interfaces.api.schemas import IngestResult
from tests.e2e.test_cli import ROOT, cli

SAMPLE = str(ROOT / "taskzilla_sleep" / "data" / "sample_week.jsonl")


@contextmanager
def worker(data: Path, clock_start: str, speed: float, env: dict[str, str] | None = None) -> Iterator[Any]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full.update(
        HF_HUB_OFFLINE="1",
        TASKZILLA_LOG_LEVEL="info",
        TASKZILLA__WORKER__POLL_S="60",
        TASKZILLA__WORKER__CATCH_UP="false",
        TASKZILLA__WORKER__SHUTDOWN_GRACE_S="60",
        **(env or {}),
    )
    data.mkdir(parents=True, exist_ok=True)
    log = (data / f"worker-{time.monotonic_ns()}.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskzilla_sleep",
            "worker",
            "--data-dir",
            str(data),
            "--api-port",
            "0",
            "--clock-start",
            clock_start,
            "--clock-speed",
            str(speed),
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=full,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "API http://" in first, f"worker did not start: {first!r} {Path(log.name).read_text()[-3000:]}"
        proc.api = first.split("API ", 1)[1].split(",", 1)[0]  # type: ignore[attr-defined]
        proc.log_path = Path(log.name)  # type: ignore[attr-defined]
        proc.tz = Client(proc.api, timeout=30)  # type: ignore[attr-defined]  # no token: an open worker
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        if hasattr(proc, "tz"):
            proc.tz.close()
        log.close()


def wait_for(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)  # each check is a status call or a log read: cheap next to what it waits for
    raise AssertionError(f"timed out waiting for {what}")


def night(proc: Any, slot: str) -> dict[str, Any] | None:
    """The scheduled night of ``slot`` once every team finished it ok: its team jobs merged
    (``nights.group_nights`` over ``graph.night_runs``, as the status reports it), with each job's run."""
    nights = [n for n in proc.tz.status()["last_nights"] if n["slot"] == slot and n["ok"]]
    return nights[0] if nights else None


STEP_SLOTS = {"prune": "03:05", "distill": "03:10", "reflect": "03:15", "decay": "03:25"}


def each_step_once_in_order_at_its_slot(got: dict[str, Any], day: str, ordered: bool = True) -> set[str]:
    """Every team's steps of the night: each ran once (one job's run has it), ok, not before its slot,
    and (``ordered``) after the team's previous step. Returns the night's teams. Two workers each have
    their own controlled clock, started a few seconds (minutes at their speed) apart: their stamps
    are not comparable with each other, only with the slots."""
    by_team: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for job in got["jobs"]:
        assert job["team"], job  # a scheduled night is team jobs
        for step, res in job["steps"].items():
            by_team.setdefault(job["team"], {}).setdefault(step, []).append(res)
    assert by_team, got
    for team, steps in by_team.items():
        assert set(steps) == set(STEP_SLOTS), (team, steps)  # every step (in cycle order: below)
        starts = []
        for step, hhmm in STEP_SLOTS.items():
            (res,) = steps[step]  # once
            assert res["status"] == "ok", (team, step, res)
            start = datetime.fromisoformat(res["started_at"])
            assert start >= datetime.fromisoformat(f"{day}T{hhmm}:00+01:00"), (team, step)
            starts.append(start)
        assert not ordered or (starts == sorted(starts) and len(set(starts)) == len(starts)), (team, starts)
    return set(by_team)


def distilling(proc: Any) -> bool:
    runs = proc.tz.status()["last_runs"]
    return bool(runs) and runs[0]["steps"]["distill"]["status"] == "running"


def stop(proc: Any, timeout: float = 90) -> int:
    proc.send_signal(signal.SIGTERM)
    return int(proc.wait(timeout=timeout))


def test_night_at_its_slots_then_the_watchdog_then_a_clean_stop(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert cli("ingest", SAMPLE, "--now", "2026-11-27T18:00:00+01:00", data_dir=data).returncode == 0
    with worker(data, "2026-11-28T02:55:00+01:00", speed=120) as w:
        assert w.tz.health().ok and w.tz.ready().ready
        run = wait_for("the night of 2026-11-28", lambda: night(w, "2026-11-28"))
        assert run["trigger"] == "schedule"
        assert "platform" in each_step_once_in_order_at_its_slot(run, "2026-11-28")
        starts = {k: datetime.fromisoformat(v["started_at"]) for k, v in run["steps"].items()}
        assert starts["prune"] < starts["distill"] < starts["reflect"] < starts["decay"]  # the merged night too
        assert len(w.tz.contradictions(team="platform")) == 1

        # Taught at "10 o'clock": three people state a new rule; the watchdog makes it recallable.
        now = datetime.fromisoformat(w.tz.status()["clock"])
        rule = [
            ("martin", "Every incident gets a written postmortem within two days."),
            ("sara", "Reminder: the incident postmortem is due within two days, every time."),
            ("lena", "Each incident needs its postmortem document written within 2 days."),
        ]
        eps = [
            {
                "team": "platform",
                "channel": "ops",
                "author": a,
                "text": t,
                "provenance": "human",
                "ts": (now - timedelta(minutes=3 - i)).isoformat(),
            }
            for i, (a, t) in enumerate(rule)
        ]
        with pytest.raises(ApiError) as bad:
            w.tz.ingest([*eps, {"team": "platform", "text": "no author"}])
        assert bad.value.status == 422 and bad.value.details[0].index == 3  # nothing written
        assert w.tz.ingest(eps) == IngestResult(new=3, present=0, skipped=0, skipped_by_connector={})
        hit = wait_for(
            "the watchdog's pattern",
            lambda: [i for i in w.tz.recall("incident postmortem", k=3, team="platform").items if i.kind == "pattern"],
        )
        assert "postmortem" in hit[0].text.casefold()
        assert "taskzilla_sleep_store_size" in w.tz.metrics()
        assert stop(w) == 0
    log = w.log_path.read_text()
    assert '"event": "watchdog_triggered"' in log and '"event": "worker_stopped"' in log
    check = cli("reconcile", "--check", data_dir=data)
    assert check.returncode == 0, check.stdout + check.stderr


def one_call_at_a_time(url: str) -> dict[str, str]:
    """The worker's environment for the LLM stub at ``url``, one call in flight and one group a call
    of at most 8 messages (a step stays mid-flight over several calls: the sample week is then
    several topics, not one)."""
    return {
        "TASKZILLA__DISTILL__TOPIC_MAX_MESSAGES": "8",
        "TASKZILLA__LLM__MODEL": "openai/stub",
        "TASKZILLA__LLM__API_BASE": url,
        "OPENAI_API_KEY": "sk-test",
        "TASKZILLA__LLM__MAX_CONCURRENCY": "1",
        "TASKZILLA__LLM__BATCH_GROUPS": "1",
    }


def test_sigterm_mid_step_exits_0_and_leaves_consistent_stores(tmp_path: Path) -> None:
    from tests.contract.test_cycle_litellm import good_model
    from tests.llm_stub import LLMStub

    data = tmp_path / "d"
    assert cli("ingest", SAMPLE, "--now", "2026-11-27T18:00:00+01:00", data_dir=data).returncode == 0
    with LLMStub(default=good_model, latency_s=1.5) as stub:
        env = one_call_at_a_time(stub.url)
        with worker(data, "2026-11-28T03:09:55+01:00", speed=10, env=env) as w:
            wait_for("distill in flight", lambda: distilling(w), timeout=60)
            assert stop(w) == 0
    log = w.log_path.read_text()
    assert '"event": "worker_stopping"' in log
    st = json.loads(cli("status", "--json", data_dir=data).stdout)
    assert st["graph"]["reachable"] and st["vectors"]["reachable"]
    check = cli("reconcile", "--check", data_dir=data)
    assert check.returncode == 0, check.stdout  # no drift between the stores
    # The left night is redone by a rerun, and converges.
    rerun = cli("run-once", "--now", "2026-11-28T03:25:00+01:00", data_dir=data)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "flagged to people" in rerun.stdout or json.loads(
        cli("contradictions", "list", "--json", data_dir=data).stdout
    )


@pytest.mark.neo4j
@pytest.mark.chroma_server
def test_two_workers_against_one_neo4j_run_the_night_once(
    tmp_path: Path, neo4j_uri: str, chroma_address: tuple[str, int]
) -> None:
    from tests.neo4j_service import servers_env

    env = servers_env(neo4j_uri, chroma_address)
    wipe = (
        "import sys; from taskzilla_sleep.core.settings import load_settings; from taskzilla_sleep.app import build;"
        "s = build(load_settings()); s.graph.delete_all(); s.vectors.delete_all(); s.close()"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | env
    subprocess.run([sys.executable, "-c", wipe], env=base, check=True, timeout=120, cwd=ROOT, capture_output=True)
    assert cli("ingest", SAMPLE, "--now", "2026-11-27T18:00:00+01:00", data_dir=tmp_path / "i", env=env).returncode == 0
    with (
        worker(tmp_path / "a", "2026-11-28T03:04:50+01:00", 120, env) as a,
        worker(tmp_path / "b", "2026-11-28T03:04:50+01:00", 120, env) as b,
    ):
        wait_for("the night", lambda: night(a, "2026-11-28"))
        time.sleep(3)  # give the other replica every chance to run it a second time
        seen_a, seen_b = night(a, "2026-11-28"), night(b, "2026-11-28")
        assert seen_a is not None and seen_a == seen_b  # one night, seen by both
        # Each team's step once, by either replica (the sample has one team: its steps are the night's).
        assert each_step_once_in_order_at_its_slot(seen_a, "2026-11-28", ordered=False) == {"platform"}
        assert stop(a) == 0 and stop(b) == 0
    logs = a.log_path.read_text() + b.log_path.read_text()
    assert logs.count('"event": "night_finished"') == len(seen_a["jobs"])  # each job run once, by one replica


def test_alert_survives_a_down_receiver_and_a_worker_restart_exactly_once(tmp_path: Path) -> None:
    from tests.http_receiver import receiver

    data = tmp_path / "d"
    cfg = tmp_path / "alerts.yaml"
    cfg.write_text(
        "alerts:\n  channels:\n    ops-hook: {kind: webhook, url_env: TEST_ALERT_WEBHOOK}\n"
        "  backoff_base_s: 60\n  backoff_max_s: 120\n  timeout_s: 2\n  nightly_summary: true\n"
    )
    assert cli("ingest", SAMPLE, "--now", "2026-11-27T18:00:00+01:00", data_dir=data).returncode == 0
    with receiver(script=[500, "close", 503]) as hook:
        env = {"TEST_ALERT_WEBHOOK": hook.url("/hook/s3cret-path-token"), "TASKZILLA_CONFIG": str(cfg)}
        with worker(data, "2026-11-28T03:04:40+01:00", speed=120, env=env) as w:
            wait_for("the night", lambda: night(w, "2026-11-28"))
            wait_for("two failed attempts", lambda: len(hook.received()) >= 2, timeout=60)
            assert stop(w) == 0  # restart in between: the outbox is in the graph, not in memory
        with worker(data, "2026-11-28T03:40:00+01:00", speed=120, env=env) as w2:
            wait_for(
                "the delivery", lambda: [a for a in hook.succeeded() if a.json()["type"] == "contradiction"], timeout=90
            )
            time.sleep(3)  # more polls: nothing is delivered twice
            assert stop(w2) == 0
        attempts = [a for a in hook.received() if a.json()["type"] == "contradiction"]
        delivered = [a for a in hook.succeeded() if a.json()["type"] == "contradiction"]
        assert len(delivered) == 1 and 2 <= len(attempts) <= 4  # the receiver's 3 failures are shared
        keys = {a.headers.get("Idempotency-Key") or a.headers.get("idempotency-key") for a in attempts}
        assert len(keys) == 1 and None not in keys
        body = delivered[0].json()
        assert "async" in json.dumps(body).casefold() and "contradictions resolve" in json.dumps(body)
        summaries = [a.json() for a in hook.succeeded() if a.json()["type"] == "summary"]
        assert len(summaries) == 1 and "patterns distilled" in summaries[0]["text"], [
            a.json()["type"] for a in hook.received()
        ]
    logs = w.log_path.read_text() + w2.log_path.read_text()
    assert "s3cret-path-token" not in logs


def test_a_second_signal_exits_at_once_and_a_rerun_repairs(tmp_path: Path) -> None:
    from tests.contract.test_cycle_litellm import good_model
    from tests.llm_stub import LLMStub

    data = tmp_path / "d"
    assert cli("ingest", SAMPLE, "--now", "2026-11-27T18:00:00+01:00", data_dir=data).returncode == 0
    with LLMStub(default=good_model, latency_s=2.0) as stub:
        env = one_call_at_a_time(stub.url)
        with worker(data, "2026-11-28T03:09:55+01:00", speed=10, env=env) as w:
            wait_for("distill in flight", lambda: distilling(w), timeout=60)
            w.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            started = time.monotonic()
            w.send_signal(signal.SIGTERM)
            assert w.wait(timeout=10) == 130 and time.monotonic() - started < 5
    assert '"event": "worker_killed"' in w.log_path.read_text()
    rerun = cli("run-once", "--now", "2026-11-28T03:25:00+01:00", data_dir=data)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert cli("reconcile", "--check", data_dir=data).returncode == 0
