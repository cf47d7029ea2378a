"""Two worker replicas share a night team by team; one is killed (SIGKILL) mid-night.

Real processes (`taskzilla-sleep worker`) on one Neo4j + Chroma server. Replica A is armed with a
crash point (``faults.crashpoint``, as the crash matrix arms it) in the middle of its first distill:
a pattern in the graph, its vector not written, the team's lease held by a dead process. Replica B,
on the same host, sees the holder's pid is gone, takes the team at once and finishes the night. The
final stores must equal an uninterrupted night of the same input (run-once over every team, the
crash matrix's snapshot), and the ledger must show each team's step succeeded exactly once.

A step decides as of its slot (not the replica's clock), so the uninterrupted night is one worker
alone on a fast clock and the comparison is exact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.models import STEP_NAMES, Run
from taskzilla_sleep.interfaces.demo import sample_lines
from tests.contract.test_crash_safety import _explain
from tests.e2e.test_cli import cli
from tests.e2e.test_concurrency import server_env
from tests.e2e.test_worker import stop, wait_for, worker

pytestmark = [pytest.mark.neo4j, pytest.mark.chroma_server]

TEAMS = ("alpha", "beta", "gamma")
SLOT = "2026-11-28"
NIGHT = "2026-11-28T03:05:00+01:00"
INGESTED = "2026-11-27T18:00:00+01:00"
# distill 10 simulated minutes after prune (12 s at this speed: B comes up while A prunes), the
# rest of the night a minute after it.
SCHEDULE = {
    f"TASKZILLA__SCHEDULE__{k}": v for k, v in {"DISTILL": "03:15", "REFLECT": "03:16", "DECAY": "03:17"}.items()
}
SPEED = 50
START = "2026-11-28T03:04:58+01:00"
CRASH = "distill.after_pattern_graph@1"


def three_teams(path: Path) -> str:
    """The sample week once per team: each team's night has the same work."""
    lines = [json.dumps(json.loads(ln) | {"team": t}) for t in TEAMS for ln in sample_lines() if ln.strip()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@contextmanager
def stores(env: dict[str, str], data: Path) -> Iterator[Any]:
    """The shared stores, opened in this process as a replica would open them."""
    from taskzilla_sleep.app import build
    from taskzilla_sleep.core.settings import Secrets, load_settings

    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | env
    with build(load_settings(env=full | {"TASKZILLA_DATA_DIR": str(data)}), Secrets.from_env({})) as s:
        yield s


def state(env: dict[str, str], data: Path) -> dict[str, Any]:
    """What the crash matrix compares (tests/crash_driver.py): every node and relationship but the
    ledger's runs, the leases (who held what, and until when) and the archive (each run's images,
    under its id), every vector id, the drift."""
    from taskzilla_sleep.memory.reconcile import reconcile

    with stores(env, data) as s:
        return {
            "graph": s.graph.snapshot(skip_labels=frozenset({"Run", "Lease", "Change", "Archived"})),
            "vectors": {
                f"{t}/{k}": sorted(s.vectors.present(t, k)) for t in s.vectors.teams() for k in ("episodes", "patterns")
            },
            "drift": reconcile(s.graph, s.vectors, repair=False).drift,
        }


def night_runs(env: dict[str, str], data: Path) -> list[Run]:
    with stores(env, data) as s:
        return list(s.graph.slot_runs(SLOT))


def wait_for_night(env: dict[str, str], data: Path, what: str) -> None:
    """Until every team's night is done in the ledger (one store opened for the polling)."""
    with stores(env, data) as s:
        runs = lambda: s.graph.slot_runs(SLOT)  # noqa: E731
        wait_for(what, lambda: all(ok_steps(runs(), t) == list(STEP_NAMES) for t in TEAMS), timeout=60)


def ok_steps(runs: list[Run], team: str) -> list[str]:
    """Every ok step of ``team`` in the night, in the order they started (a repeat shows twice)."""
    steps = [s for r in runs if r.team == team for s in r.steps if s.status == "ok"]
    return [s.step for s in sorted(steps, key=lambda s: s.started_at or datetime.min)]


def test_killing_one_of_two_replicas_mid_night_loses_no_team_and_repeats_no_step(
    tmp_path: Path, neo4j_uri: str, chroma_address: tuple[str, int]
) -> None:
    sample = three_teams(tmp_path / "teams.jsonl")

    # The uninterrupted night: one worker alone, on a fast clock.
    env = server_env(neo4j_uri, chroma_address) | SCHEDULE  # wiped
    assert cli("ingest", sample, "--now", INGESTED, data_dir=tmp_path / "base", env=env).returncode == 0
    with worker(tmp_path / "base", START, 1000, env) as alone:
        wait_for_night(env, tmp_path / "base", "the uninterrupted night")
        assert stop(alone) == 0
    expected = state(env, tmp_path / "base")
    assert expected["drift"] == 0
    assert [n["labels"] for n in expected["graph"]["nodes"]].count(["Pattern"]) >= 3 * len(TEAMS)

    # The same input, two replicas; A dies at its first pattern write.
    env = server_env(neo4j_uri, chroma_address) | SCHEDULE  # wiped again
    assert cli("ingest", sample, "--now", INGESTED, data_dir=tmp_path / "i", env=env).returncode == 0
    # B starts a few seconds after A (its clock a few simulated minutes behind): A is first at the
    # distill slot, and B is up before it.
    with (
        worker(tmp_path / "a", START, SPEED, env | {"TASKZILLA_CRASH_AT": CRASH}) as a,
        worker(tmp_path / "b", START, SPEED, env) as b,
    ):
        assert a.poll() is None, "A reached its crash point before B was up: the replicas never overlapped"
        wait_for("replica A to be killed mid-distill", lambda: a.poll() is not None, timeout=60)
        assert a.returncode == -9, a.log_path.read_text()[-3000:]
        wait_for_night(env, tmp_path / "i", "B to finish every team's night")
        assert b.poll() is None
        assert stop(b) == 0
    runs = night_runs(env, tmp_path / "i")
    for t in TEAMS:  # every team's night finished, each step ok exactly once, in cycle order
        assert ok_steps(runs, t) == list(STEP_NAMES), t
    # A's job: left mid-distill, marked abandoned by B, which took the team from the dead holder.
    (left,) = [r for r in runs if any(s.status != "ok" for s in r.steps)]
    assert [(s.step, s.status) for s in left.steps if s.status != "ok"][0] == ("distill", "abandoned")
    assert "stopped before the step finished (found by worker@" in str(left.steps)
    taken = [json.loads(ln) for ln in b.log_path.read_text().splitlines() if "lease_taken_from_dead_holder" in ln]
    assert [e["lease"] for e in taken] == [f"consolidation:{left.team}"] and f":{a.pid}:" in taken[0]["dead"]
    got = state(env, tmp_path / "i")
    if got != expected:
        _explain(f"replica A killed at {CRASH}", expected, got)  # what differs, printed as the crash matrix does
    assert got == expected
