"""SIGKILL at every point of the cycle (inside each step, between the two stores' writes), then a rerun:
both stores end exactly as after an uninterrupted run — no lost episode, no duplicate pattern, no drift.

Two scenarios: the sample week over three nights, with messages delivered late (after the night that
covered their timestamps) before night 2; and one night over a generated busy week, where distill
writes dozens of patterns and a rerun that decided again from what the crash left would differ."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

CRASH_POINTS = [
    "ingest.after_graph",  # episodes in the graph, no vectors yet
    "pipeline.after_prune",  # night 1: between prune and distill
    "distill.after_journal",  # the plan is in the journal, nothing of it applied
    "distill.after_pattern_graph@1",  # first pattern written to the graph, its vector not yet
    "distill.after_pattern_graph@3",  # in the middle of the patterns
    "distill.before_watermark",  # every pattern written and its episodes marked, the journal not closed
    "pipeline.after_distill",  # between distill and reflect
    "reflect.after_contradiction",  # contradiction opened, watermark not moved
    "reflect.before_watermark",
    "distill.after_pattern_graph@6",  # night 2: the late messages' pattern written, nothing else
    "distill.before_watermark@2",  # night 2: the late messages distilled, the journal not closed
    "decay.after_graph@2",  # night 2: episodes retired in the graph, vectors still in Chroma
    "decay.after_vectors@2",  # vectors gone, ledger not recorded
    "prune.after_graph@3",  # night 3: episodes pruned in the graph, vectors still in Chroma
    "pipeline.after_decay@3",  # the last step done, the night's ledger not closed
]


def _env(stack_env: dict[str, str], data_dir: Path, crash: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    env.update(stack_env, TASKZILLA_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", TASKZILLA_LOG_LEVEL="warning")
    if crash:
        env["TASKZILLA_CRASH_AT"] = crash
    return env


def _drive(env: dict[str, str], progress: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.crash_driver", str(progress), *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )


def _snapshot(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(
    params=[
        "falkordb+chroma-embedded",
        pytest.param("neo4j+chroma-server", marks=[pytest.mark.neo4j, pytest.mark.chroma_server]),
    ]
)
def stack_env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param.startswith("falkordb"):
        return {}
    from tests.neo4j_service import servers_env

    return servers_env(request.getfixturevalue("neo4j_uri"), request.getfixturevalue("chroma_address"))


# A generated busy week: the middle of distill's writes, and all of them written but the journal open.
BUSY_POINTS = ["distill.after_pattern_graph@10", "distill.before_watermark"]


# On the server pair `make test` kills at one point of each kind (the whole list runs on the embedded
# pair, whose store code is the same ports); TASKZILLA_CRASH_MATRIX=full runs every point on both.
SERVER_POINTS = [
    "ingest.after_graph",
    "distill.after_pattern_graph@3",
    "reflect.after_contradiction",
    "decay.after_graph@2",
    "prune.after_graph@3",
]


def test_sigkill_anywhere_then_rerun_equals_an_uninterrupted_run(stack_env: dict[str, str], tmp_path: Path) -> None:
    full = not stack_env or os.environ.get("TASKZILLA_CRASH_MATRIX") == "full"
    expected = _matrix(stack_env, tmp_path, CRASH_POINTS if full else SERVER_POINTS)
    labels = [n["labels"][0] for n in expected["graph"]["nodes"]]
    assert labels.count("Pattern") >= 5 and labels.count("Contradiction") == 1 and labels.count("Tombstone") > 0
    # The messages delivered after night 1 (timestamped before it) were distilled by night 2.
    assert any(
        n["labels"] == ["Pattern"] and "#releases" in n["props"]["statement"] for n in expected["graph"]["nodes"]
    )


def test_sigkill_in_a_busy_distill_then_rerun_equals_an_uninterrupted_run(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    expected = _matrix(stack_env, tmp_path, BUSY_POINTS, "--busy")
    # The kill at the 10th pattern write is in the middle of the night's writes (the belief gate
    # leaves about 19 patterns in this week).
    assert [n["labels"][0] for n in expected["graph"]["nodes"]].count("Pattern") >= 15


# Inside an undo (the second night's, after both nights): its alerts withdrawn, its images put back in
# the graph, the vectors following, and everything but the change's mark.
UNDO_POINTS = ["undo.after_alerts", "undo.after_graph_batch", "undo.after_vectors"]


def test_sigkill_in_an_undo_then_rerun_equals_an_uninterrupted_undo_and_the_state_before_the_night(
    stack_env: dict[str, str], tmp_path: Path
) -> None:
    full = not stack_env or os.environ.get("TASKZILLA_CRASH_MATRIX") == "full"
    expected = _matrix(stack_env, tmp_path, UNDO_POINTS if full else ["undo.after_graph_batch"], "--undo")
    # ... and an undo leaves what the night found: the state right after the late messages' ingest.
    before = _drive(
        _env(stack_env, tmp_path / "before", None),
        tmp_path / "before.progress",
        "--fresh",
        "--snapshot",
        "--undo",
        "--stop-after",
        "late",
    )
    assert before.returncode == 0, before.stderr[-3000:]
    assert _snapshot(before.stdout) == expected
    assert not any("#releases" in n["props"].get("statement", "") for n in expected["graph"]["nodes"])


def _matrix(stack_env: dict[str, str], tmp_path: Path, points: list[str], *flags: str) -> dict[str, Any]:
    """Crash at each point, rerun, compare with an uninterrupted run; returns the uninterrupted snapshot.

    On the embedded pair every run has its own data dir (its own FalkorDB and Chroma files): the
    uninterrupted run and the points run two at a time (pytest itself waits, so two cores are two
    drivers). The server pair shares one Neo4j and one Chroma server, which ``--fresh`` empties: one at
    a time."""

    def base() -> subprocess.CompletedProcess[str]:
        return _drive(
            _env(stack_env, tmp_path / "base", None), tmp_path / "base.progress", "--fresh", "--snapshot", *flags
        )

    def crash_then_rerun(
        point: str,
    ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str] | None]:
        d, progress = tmp_path / point.replace("@", "-"), tmp_path / f"{point}.progress"
        crashed = _drive(_env(stack_env, d, point), progress, "--fresh", *flags)
        if crashed.returncode != -9:
            return crashed, None
        return crashed, _drive(_env(stack_env, d, None), progress, "--snapshot", *flags)

    with ThreadPoolExecutor(max_workers=1 if stack_env else 2) as pool:
        base_run = pool.submit(base)
        if stack_env:  # the base run first: each run on the shared servers starts by emptying them
            base_run.result()
        runs = [(point, pool.submit(crash_then_rerun, point)) for point in points]
        expected_run = base_run.result()
        assert expected_run.returncode == 0, expected_run.stderr[-3000:]
        expected = _snapshot(expected_run.stdout)
        assert expected["drift"] == 0
        failures = []
        for point, run in runs:
            crashed, rerun = run.result()
            assert crashed.returncode == -9, (
                f"{point}: the crash point was not reached ({crashed.returncode}) {crashed.stderr[-2000:]}"
            )
            assert rerun is not None and rerun.returncode == 0, (
                f"{point}: rerun failed: {rerun and rerun.stderr[-3000:]}"
            )
            got = _snapshot(rerun.stdout)
            if got != expected:
                failures.append(point)
                _explain(point, expected, got)
    assert failures == []
    return expected


def _explain(point: str, expected: dict[str, Any], got: dict[str, Any]) -> None:
    exp_nodes = {json.dumps(n, sort_keys=True) for n in expected["graph"]["nodes"]}
    got_nodes = {json.dumps(n, sort_keys=True) for n in got["graph"]["nodes"]}
    print(f"--- {point}: drift {got['drift']}")
    for n in sorted(exp_nodes - got_nodes)[:5]:
        print("  missing ", n[:400])
    for n in sorted(got_nodes - exp_nodes)[:5]:
        print("  extra   ", n[:400])
    exp_rels = {json.dumps(r, sort_keys=True) for r in expected["graph"]["relationships"]}
    got_rels = {json.dumps(r, sort_keys=True) for r in got["graph"]["relationships"]}
    for r in sorted(exp_rels - got_rels)[:5]:
        print("  missing rel", r[:300])
    for r in sorted(got_rels - exp_rels)[:5]:
        print("  extra rel  ", r[:300])
    if len(expected["graph"]["relationships"]) != len(got["graph"]["relationships"]):
        print("  relationship counts", len(expected["graph"]["relationships"]), len(got["graph"]["relationships"]))
    if expected["vectors"] != got["vectors"]:
        print(
            "  vectors differ",
            {k: len(v) for k, v in expected["vectors"].items()},
            {k: len(v) for k, v in got["vectors"].items()},
        )
