"""Decisions made on the command line are on the audit trail, whatever --log-level says, and
`audit list` shows who decided what: each command a subprocess, as a person runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import cli, episodes


def audit_events(stderr: str) -> list[dict[str, object]]:
    """The audit events of a command's log stream (JSON lines: stderr is not a terminal here)."""
    out = []
    for line in stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "audit":
            out.append(event)
    return out


def test_command_line_decisions_are_on_record_and_listed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli("demo", "--json", data_dir=data).returncode == 0
    (con,) = json.loads(cli("contradictions", "list", "--json", data_dir=data).stdout)
    cid = con["contradiction"]["id"]

    quiet = ("--log-level", "error")
    done = cli(
        *quiet, "contradictions", "resolve", cid, "--keep", "new", "--by", "martin", "--note", "voice", data_dir=data
    )
    assert done.returncode == 0, done.stderr
    (event,) = audit_events(done.stderr)  # in the log stream although only errors are logged
    assert (event["who"], event["action"], event["ids"], event["keep"]) == ("cli:martin", "resolve", [cid], "new")

    src = tmp_path / "eps.jsonl"
    src.write_text(episodes(3))
    assert cli(*quiet, "ingest", str(src), data_dir=data).returncode == 0
    pinned = cli(
        *quiet, "facts", "pin", "Lea is on call", "--team", "platform", "--by", "dana", "--json", data_dir=data
    )
    assert pinned.returncode == 0, pinned.stderr
    fid = json.loads(pinned.stdout)["id"]
    forgot = cli(
        *quiet, "forget", "pattern", fid, "--team", "platform", "--by", "dana", "--reason", "wrong", data_dir=data
    )
    assert forgot.returncode == 0, forgot.stderr

    listed = cli("audit", "list", "--json", data_dir=data)
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    assert [(r["action"], r["who"]) for r in records][:2] == [("forget", "cli:dana"), ("pin", "cli:dana")]
    assert [r["action"] for r in records[2:]] == ["ingest", "resolve"]
    assert records[2]["who"].startswith("cli:") and records[2]["n"] == 3 and records[2]["team"] == "platform"
    assert records[3]["note"] == "voice" and records[0]["reason"] == "wrong" and records[1]["ids"] == [fid]

    pins = json.loads(cli("audit", "list", "--action", "pin", "--json", data_dir=data).stdout)
    assert [r["ids"] for r in pins] == [[fid]]
    assert json.loads(cli("audit", "list", "--team", "ops", "--json", data_dir=data).stdout) == []
    later = cli("audit", "list", "--since", "2999-01-01T00:00:00+00:00", data_dir=data)
    assert later.stdout.strip() == "(no decisions on record)"
    text = cli("audit", "list", "--limit", "1", data_dir=data).stdout.splitlines()
    assert len(text) == 1 and " cli:dana (admin) forget platform " in text[0] and 'reason="wrong"' in text[0]
    bad = cli("audit", "list", "--limit", "0", data_dir=data)
    assert bad.returncode == 2 and "--limit" in bad.stderr
    lines = (data / "audit.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(x)["at"] for x in lines)
