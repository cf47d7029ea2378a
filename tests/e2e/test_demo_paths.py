"""`taskzilla-sleep demo` names only paths that exist after it exits: without --data-dir its stores
live in a temporary folder that it removes, so it names none of it; with --data-dir it keeps the
folder and every path it prints is there."""

from __future__ import annotations

import json
import re
from pathlib import Path

from taskzilla_sleep.interfaces.demo import GONE, _without
from tests.e2e.test_cli import cli

PATH = re.compile(r"(/[\w.\-/]+)")


def test_demo_without_a_data_dir_names_no_path_it_removed(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    res = cli("demo", env={"TMPDIR": str(scratch)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert not list(scratch.glob("taskzilla-demo-*"))  # removed
    assert str(scratch) not in res.stdout, [ln for ln in res.stdout.splitlines() if str(scratch) in ln]
    assert f"memory index the bot loads: MEMORY.md in {GONE}" in res.stdout
    assert "keep them with --data-dir DIR" in res.stdout


def test_demo_with_a_data_dir_keeps_it_and_every_printed_path_exists(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    res = cli("demo", data_dir=data)
    assert res.returncode == 0, res.stderr[-2000:]
    index = re.search(r"^memory index the bot loads: (\S+)$", res.stdout, re.M)
    assert index is not None and Path(index.group(1)).is_file() and Path(index.group(1)).is_relative_to(data)
    paths = [p for p in PATH.findall(res.stdout) if p.startswith(str(data))]
    assert len(paths) >= 3 and all(Path(p).exists() for p in paths), paths


def test_the_json_of_a_temporary_demo_drops_its_paths_too() -> None:
    data = {"status": {"data_dir": "/tmp/taskzilla-demo-x1", "graph": {"where": "/tmp/taskzilla-demo-x1/falkordb"}}}
    out = json.loads(_without("/tmp/taskzilla-demo-x1", json.dumps(data)))
    assert out == {"status": {"data_dir": GONE, "graph": {"where": GONE}}}
    assert (
        _without("/tmp/d", "kept /tmp/data and /tmp/d/chroma, then /tmp/d.")
        == f"kept /tmp/data and {GONE}, then {GONE}."
    )


def test_the_demo_prints_clean_output_with_one_count_of_patterns(tmp_path: Path) -> None:
    """`make demo` as a newcomer reads it: nothing on stderr above the night (no JSON log line), and
    the patterns counted once, agreeing with the patterns the night lists and the pinned fact."""
    res = cli("demo", env={"TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr == ""  # a warning log line (JSON when not a terminal) used to come first
    out = res.stdout
    assert not [ln for ln in out.splitlines() if ln.lstrip().startswith("{")]
    listed = re.findall(r"^  pat_\w+ \[", out.split("patterns distilled:")[1].split("\n\n")[0], re.M)
    counts = re.findall(r"(\d+) patterns\b", out)
    assert counts == [str(len(listed) + 1)], counts  # once: the distilled ones and the pinned fact
    assert f"({len(listed)} distilled + 1 pinned fact; " in out
    for noisy in ("graph store:", "vector store:", "config:", "lease:"):  # the status report's, repeated
        assert noisy not in out, noisy
    assert re.search(r"^memory: +\d+ episodes .*; 1 open contradiction$", out, re.M), out[-600:]
