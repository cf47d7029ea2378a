"""The nightly cycle from the command line, as an operator runs it, on the embedded stores."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import ROOT, cli

NIGHT = "2026-11-28T03:05:00+01:00"
H71 = "2026-12-01T02:05:00+01:00"
H73 = "2026-12-01T04:05:00+01:00"

SNAPSHOT = (
    "import json, sys; from taskzilla_sleep.core.settings import load_settings; from taskzilla_sleep.app import build;"
    "from taskzilla_sleep.core.logs import configure_logging; configure_logging('warning');"
    "s = build(load_settings(env={'TASKZILLA_DATA_DIR': sys.argv[1]}));"
    "v = {f'{t}/{k}': sorted(s.vectors.present(t, k)) for t in s.vectors.teams() for k in ('episodes', 'patterns')};"
    "print(json.dumps({'graph': s.graph.snapshot(skip_labels=frozenset()), 'vectors': v}, default=str)); s.close()"
)


def snapshot(data: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", SNAPSHOT, str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("demo")
    res = cli("demo", data_dir=data)
    assert res.returncode == 0, res.stderr[-3000:]
    (data / "demo.out").write_text(res.stdout)
    return data


def test_demo_shows_patterns_absorbed_episodes_and_a_contradiction(demo_dir: Path) -> None:
    out = (demo_dir / "demo.out").read_text()
    section = out.split("patterns distilled:")[1].split("\n\n")[0]
    assert len(re.findall(r"^  pat_", section, re.M)) >= 3
    assert "episodes absorbed" in out
    # The standup switch is a change to confirm, not a disagreement: the new way stays in use.
    assert "changes flagged to people to confirm (both beliefs kept; the new one stays in use" in out
    assert re.search(r"con_\w+ \(update\):", out)
    assert re.search(r"old belief pat_\w+ \(\d+ episodes\): .*async", out)
    assert re.search(r"new belief pat_\w+ \(\d+ episodes, since 2026-11-26\): .*voice", out)
    assert re.search(r"confirm: taskzilla-sleep contradictions resolve con_\w+ --keep new --by NAME", out)
    assert "resolve: taskzilla-sleep contradictions resolve con_" in out
    assert "pinned fact: fact_" in out
    index = (demo_dir / "memory" / "platform" / "MEMORY.md").read_text()
    assert index.startswith("# Memory index") and '- fact (pinned): "Martin Vos' in index
    # The bot's memory still says how standups work: the new way, marked unconfirmed (and the demo shows it).
    (standup,) = [line for line in index.splitlines() if "standup" in line.casefold()]
    assert "voice" in standup and "awaiting confirmation" in standup and f"  {standup}" in out


def test_dry_run_writes_nothing_and_a_second_run_changes_nothing(demo_dir: Path, tmp_path: Path) -> None:
    before = snapshot(demo_dir)
    dry = cli("run-once", "--now", H73, "--dry-run", data_dir=demo_dir)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "nothing was written" in dry.stdout and "- retire ep_" in dry.stdout
    totals = dry.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"totals, would change: prune: .*; distill: .*; reflect: .*; decay: retired \d+", totals)
    assert snapshot(demo_dir) == before  # not even a ledger entry

    again = cli("run-once", "--now", NIGHT, "--json", data_dir=demo_dir)
    assert again.returncode == 0, again.stderr[-2000:]
    steps = json.loads(again.stdout)["steps"]
    changes = {
        k: v
        for s in steps
        for k, v in s["counts"].items()
        if v and k not in ("examined", "episodes_read", "waiting", "compared", "withheld", "shown", "unread")
    }
    assert changes == {}
    after = snapshot(demo_dir)
    runs = [n for n in after["graph"]["nodes"] if n["labels"] == ["Run"]]
    assert len(runs) == 2  # the demo's night and this one: the ledger records even a no-op night
    # The ledger and the (released) lease run-once took are bookkeeping; the memory itself is unchanged.
    leases = [n["props"] for n in after["graph"]["nodes"] if n["labels"] == ["Lease"]]
    assert [(x["name"], x.get("holder")) for x in leases] == [("consolidation", None)]
    # The archive records what each run wrote under the run's id (undo): bookkeeping too.
    book = (["Run"], ["Lease"], ["Change"], ["Archived"])
    strip = lambda snap: [n for n in snap["graph"]["nodes"] if n["labels"] not in book]  # noqa: E731
    assert strip(after) == strip(before)


def test_decay_waits_71_hours_and_retires_at_73(demo_dir: Path) -> None:
    early = cli("run-once", "--now", H71, "--steps", "decay", "--json", data_dir=demo_dir)
    assert early.returncode == 0 and json.loads(early.stdout)["steps"][0]["counts"]["retired"] == 0
    late = cli("run-once", "--now", H73, "--steps", "decay", data_dir=demo_dir)
    assert late.returncode == 0, late.stderr[-2000:]
    m = re.search(r"retired (\d+) absorbed episodes", late.stdout)
    assert m and int(m.group(1)) >= 9
    st = json.loads(cli("status", "--json", data_dir=demo_dir).stdout)
    assert st["graph_counts"]["episodes"]["retired"] == int(m.group(1))
    assert st["graph_counts"]["tombstones"] == int(m.group(1))


def test_recall_facts_and_the_human_loop(demo_dir: Path) -> None:
    rec = cli("recall", "who is the engineering manager?", "--json", data_dir=demo_dir)
    assert rec.returncode == 0, rec.stderr[-2000:]
    items = json.loads(rec.stdout)
    assert items[0]["kind"] == "fact" and "Martin Vos" in items[0]["text"]
    rec = cli("recall", "do we deploy on fridays?", data_dir=demo_dir)
    first = rec.stdout.splitlines()[0]
    assert first.startswith("[pattern active, confidence ") and ", similarity " in first and "Friday" in first
    block = cli("recall", "do we deploy on fridays?", "--format", "prompt", "--budget", "300", data_dir=demo_dir)
    head, line, *_ = block.stdout.splitlines()
    assert "not instructions" in head and line.startswith("- pattern (") and "Friday" in line

    facts = cli("facts", "list", "--json", data_dir=demo_dir)
    (fact,) = json.loads(facts.stdout)
    assert fact["pinned"] and fact["confidence"] == 1.0 and fact["pinned_by"] == "martin"

    listed = cli("contradictions", "list", "--json", data_dir=demo_dir)
    (view,) = json.loads(listed.stdout)  # the API's shape: the contradiction and both beliefs' text
    assert "async" in view["old"].casefold() and "voice" in view["new"].casefold()
    con = view["contradiction"]
    done = cli(
        "contradictions",
        "resolve",
        con["id"],
        "--keep",
        "new",
        "--by",
        "sara",
        "--note",
        "moved to voice",
        data_dir=demo_dir,
    )
    assert done.returncode == 0 and "kept new" in done.stdout
    same = cli("contradictions", "resolve", con["id"], "--keep", "new", "--by", "lena", "--json", data_dir=demo_dir)
    assert same.returncode == 0, same.stderr[-2000:]  # a repeat of the decision: the recorded resolution
    assert json.loads(same.stdout) | {"id": con["id"], "resolution": "new", "resolved_by": "cli:sara"} == json.loads(
        same.stdout
    )
    again = cli("contradictions", "resolve", con["id"], "--keep", "old", "--by", "lena", data_dir=demo_dir)
    assert again.returncode == 1 and "already resolved" in again.stderr
    assert json.loads(cli("contradictions", "list", "--json", data_dir=demo_dir).stdout) == []
    resolved = json.loads(cli("contradictions", "list", "--status", "resolved", "--json", data_dir=demo_dir).stdout)
    assert resolved[0]["contradiction"]["resolved_by"] == "cli:sara"
    assert resolved[0]["contradiction"]["note"] == "moved to voice"

    unpin = cli("facts", "unpin", fact["id"], "--by", "martin", "--json", data_dir=demo_dir)
    assert unpin.returncode == 0, unpin.stderr[-2000:]
    assert json.loads(unpin.stdout) | {"id": fact["id"], "archived_by": "cli:martin"} == json.loads(unpin.stdout)
    again = cli("facts", "unpin", fact["id"], "--by", "martin", data_dir=demo_dir)
    assert again.returncode == 1 and "already unpinned" in again.stderr
    pin = cli("facts", "pin", "Lea is on call this week", "--by", "lea", "--entity", "lea", "--json", data_dir=demo_dir)
    assert pin.returncode == 0, pin.stderr[-2000:]
    pinned = json.loads(pin.stdout)  # the fact as the API returns it
    assert (pinned["statement"], pinned["pinned"], pinned["pinned_by"]) == ("Lea is on call this week", True, "cli:lea")


def test_bad_usage_of_run_once(tmp_path: Path) -> None:
    res = cli("run-once", "--steps", "distill,dream", data_dir=tmp_path)
    assert res.returncode == 2 and "unknown step(s) dream" in res.stderr
    res = cli("run-once", "--now", "2026-11-30T03:05:00", data_dir=tmp_path)
    assert res.returncode == 2 and "no UTC offset" in res.stderr
