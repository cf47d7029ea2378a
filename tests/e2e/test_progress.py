"""Progress of the four long commands as a log collector sees it (stderr a pipe, not a terminal): JSON
`progress` events that parse, at most one a second within a phase, ending with a final one at done ==
total; and Ctrl-C in an import, whose note's advice finishes the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.shell import as_from_a_shell
from tests.e2e.test_cli import ROOT, cli

SAMPLE = str(ROOT / "taskzilla_sleep" / "data" / "sample_week.jsonl")
INGESTED = "2026-11-27T18:00:00+01:00"
NIGHT = "2026-11-28T03:05:00+01:00"
KEYS = {"event", "command", "phase", "done", "total", "unit", "elapsed_s"}


def progress_events(stderr: str, command: str) -> list[dict[str, Any]]:
    """The progress events on stderr, checked: shape, order, rate, and the final one at done == total."""
    found = [json.loads(ln) for ln in stderr.splitlines() if ln.startswith('{"event": "progress"')]
    assert len(found) >= 2, stderr[-2000:]
    for e in found:
        assert set(e) >= KEYS and e["command"] == command, e
        assert isinstance(e["done"], int) and isinstance(e["total"], int) and e["done"] >= 0, e
    assert [e["elapsed_s"] for e in found] == sorted(e["elapsed_s"] for e in found)
    for before, after in zip(found, found[1:-1], strict=False):
        if after["phase"] == before["phase"]:
            assert after["done"] >= before["done"], (before, after)
            if "note" not in after:  # within a phase: at most one a second
                assert after["elapsed_s"] - before["elapsed_s"] >= 0.99, (before, after)
    *rest, last = found
    assert last.get("final") is True and not any(e.get("final") for e in rest)
    assert last["done"] == last["total"], last
    return found


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A data dir holding the sample week, and its export."""
    base = tmp_path_factory.mktemp("progress")
    data, export = base / "d", base / "platform.jsonl"
    res = cli("ingest", SAMPLE, "--now", INGESTED, data_dir=data)
    assert res.returncode == 0, res.stderr[-2000:]
    events = progress_events(res.stderr, "ingest")
    assert [e["phase"] for e in events][:2] == ["graph", "embed"] and events[-1]["unit"] == "vectors"
    assert events[-1]["totals"]["new"] == 52 and events[-1]["totals"]["vectors_written"] == 52
    res = cli("export", "--team", "platform", "-o", str(export), data_dir=data)
    assert res.returncode == 0, res.stderr[-2000:]
    return data, export


def test_run_once_import_and_reconcile_end_with_done_equal_to_total(sample: tuple[Path, Path]) -> None:
    data, export = sample
    dry = cli("run-once", "--dry-run", "--now", NIGHT, data_dir=data)
    assert dry.returncode == 0, dry.stderr[-2000:]
    steps = progress_events(dry.stderr, "run-once")
    assert [e["phase"] for e in steps] == ["prune", "distill", "reflect", "decay", "decay"]
    assert steps[-1]["total"] == 4 and steps[-1]["unit"] == "steps"
    totals = steps[-1]["totals"]  # a dry run ends with its totals: what each step would change
    assert totals["dry_run"] is True and totals["steps"]["distill"]["patterns_added"] >= 1
    assert f"patterns_added {totals['steps']['distill']['patterns_added']}" in dry.stdout.splitlines()[-1]

    imported = cli("import", str(export), "--replace", "--progress", "json", data_dir=data)
    assert imported.returncode == 0, imported.stderr[-2000:]
    phases = progress_events(imported.stderr, "import")
    assert [p for p in dict.fromkeys(e["phase"] for e in phases)] == ["delete", "graph", "vectors"]
    assert phases[-1]["total"] == 52 and phases[-1]["totals"]["replaced"] is True

    check = cli("reconcile", "--check", "--json", data_dir=data)
    assert check.returncode == 0, check.stderr[-2000:]
    checked = progress_events(check.stderr, "reconcile")
    assert checked[-1]["total"] == 2 and checked[-1]["totals"]["drift"] == json.loads(check.stdout)["drift"] == 0

    quiet = cli("reconcile", "--no-progress", data_dir=data)
    assert quiet.returncode == 0 and '"progress"' not in quiet.stderr
    bar = cli("reconcile", "--progress", "bar", data_dir=data)  # the terminal's line, asked for on a pipe
    # (text mode reads each \r as a line end)
    assert bar.stderr.startswith("\nreconcile: repair [") and "\n\x1b[Kreconcile: done in " in bar.stderr


def test_ctrl_c_mid_import_names_what_was_left_and_its_advice_finishes_the_job(
    sample: tuple[Path, Path], tmp_path: Path
) -> None:
    _, export = sample
    data = tmp_path / "fresh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | {"HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "taskzilla_sleep", "import", str(export), "--data-dir", str(data)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=as_from_a_shell
    )
    try:
        assert proc.stderr is not None
        seen = []
        for ln in proc.stderr:
            seen.append(ln.rstrip("\n"))
            if ln.startswith('{"event": "progress"') and json.loads(ln)["phase"] == "graph":
                proc.send_signal(signal.SIGINT)  # the graph is being written; the vectors come after
        assert proc.wait(timeout=60) == 130, seen
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    note = seen[-1]
    print(note)  # which phase it stopped in (pytest -rP)
    assert note.startswith("taskzilla-sleep: interrupted"), seen
    if "items of team 'platform' written to the graph" in note:  # stopped in the graph: the team is partly there
        assert "re-run it with --replace to finish" in note
        finish = cli("import", str(export), "--replace", data_dir=data)
    else:  # stopped in the vectors: reconcile embeds the rest
        assert "`taskzilla-sleep reconcile` embeds the rest" in note, note
        finish = cli("reconcile", data_dir=data)
    assert finish.returncode == 0, finish.stderr[-2000:]
    assert cli("reconcile", "--check", data_dir=data).returncode == 0
    again = tmp_path / "again.jsonl"
    assert cli("export", "--team", "platform", "-o", str(again), data_dir=data).returncode == 0
    ours, theirs = again.read_text().splitlines(), export.read_text().splitlines()
    assert ours[1:-1] == theirs[1:-1]  # all but exported_at, and the trailer's checksum of it
    assert json.loads(ours[-1])["counts"] == json.loads(theirs[-1])["counts"]
