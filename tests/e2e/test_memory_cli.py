"""`patterns`, `forget`, `export` and `import` in a subprocess, as a person runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import cli, episodes, status_json
from tests.unit.test_memory_admin import retrailed


def test_inspect_forget_export_and_import(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    demo = cli("demo", "--json", data_dir=src)
    assert demo.returncode == 0, demo.stderr

    listed = cli("patterns", "list", "--team", "platform", "--json", data_dir=src)
    assert listed.returncode == 0, listed.stderr
    patterns = json.loads(listed.stdout)
    assert patterns and {"id", "statement", "status", "confidence"} <= set(patterns[0])
    patterns = [p for p in patterns if p["support_count"]]  # the pinned fact has no evidence
    shown = cli("patterns", "show", patterns[0]["id"], "--team", "platform", "--json", data_dir=src)
    assert shown.returncode == 0, shown.stderr
    detail = json.loads(shown.stdout)
    evidence = detail["evidence"]
    assert detail["pattern"]["id"] == patterns[0]["id"] and evidence and evidence[0]["text"]
    other_team = cli("patterns", "show", patterns[0]["id"], "--team", "elsewhere", data_dir=src)
    assert other_team.returncode == 1 and "no pattern" in other_team.stderr

    author = evidence[0]["author"]
    forgot = cli(
        "forget",
        "author",
        author,
        "--team",
        "platform",
        "--by",
        author,
        "--reason",
        "delete my data",
        "--json",
        data_dir=src,
    )
    assert forgot.returncode == 0, forgot.stderr
    report = json.loads(forgot.stdout)
    assert report["episodes_forgotten"] and report["patterns_rescored"]
    again = cli("patterns", "show", patterns[0]["id"], "--team", "platform", "--json", data_dir=src)
    if again.returncode == 0:  # still there: none of the forgotten author's messages is its evidence now
        assert all(e["author"] != author for e in json.loads(again.stdout)["evidence"])
    missing = cli("forget", "episode", "ep_nope", "--team", "platform", "--by", "x", "--reason", "y", data_dir=src)
    assert missing.returncode == 1 and "no episode" in missing.stderr

    export = tmp_path / "platform.jsonl"
    out = cli("export", "--team", "platform", "-o", str(export), data_dir=src)
    assert out.returncode == 0, out.stderr
    lines = export.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header"
    assert author not in "".join(json.loads(x).get("text", "") for x in lines[1:] if '"tombstone"' in x)

    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:3], '{"type": "episode", "id": 1}', *lines[3:]]) + "\n")
    refused = cli("import", str(bad), data_dir=dst)
    assert refused.returncode == 1 and "bad.jsonl:4: episode: field" in refused.stderr
    assert not (dst / "falkordb").exists()  # validated before any store was opened

    imported = cli("import", str(export), "--json", data_dir=dst)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["replaced"] is False
    before, after = status_json(src), status_json(dst)
    assert after["graph_counts"] == before["graph_counts"]
    assert after["vector_counts"] == before["vector_counts"]
    twice = cli("import", str(export), data_dir=dst)
    assert twice.returncode == 1 and "--replace" in twice.stderr
    replaced = cli("import", str(export), "--replace", data_dir=dst)
    assert replaced.returncode == 0, replaced.stderr
    assert status_json(dst)["graph_counts"] == before["graph_counts"]


def test_import_refuses_a_cut_or_renamed_file_and_copies_a_team_with_as_team(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    assert cli("demo", "--json", data_dir=src).returncode == 0
    export = tmp_path / "platform.jsonl"
    assert cli("export", "--team", "platform", "-o", str(export), data_dir=src).returncode == 0
    lines = export.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "trailer"

    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-4]) + "\n")  # cut at a line boundary: every line left is valid JSON
    refused = cli("import", str(cut), data_dir=dst)
    assert refused.returncode == 1, refused.stderr
    assert f"cut.jsonl: the file ends after line {len(lines) - 4} without its trailer: cut short?" in refused.stderr
    assert not (dst / "falkordb").exists()  # refused before any store was opened

    old = tmp_path / "old.jsonl"  # an export written before trailers
    old.write_text("\n".join([lines[0].replace('"version": 2', '"version": 1'), *lines[1:-1]]) + "\n")
    unchecked = cli("import", str(old), data_dir=dst)
    assert unchecked.returncode == 1 and "(if it is whole: --no-trailer)" in unchecked.stderr
    warned = cli("import", str(old), "--no-trailer", "--json", data_dir=dst)
    assert warned.returncode == 0, warned.stderr
    assert "taskzilla-sleep: warning: " in warned.stderr and "imported without that check" in warned.stderr
    assert json.loads(warned.stdout)["warnings"]

    before = status_json(src)
    renamed = tmp_path / "renamed.jsonl"
    body = [
        x.replace('"platform"', '"renamed"').replace('"platform/', '"renamed/').replace(':platform"', ':renamed"')
        for x in lines[:-1]
    ]
    renamed.write_text("\n".join(retrailed(body)) + "\n")
    taken = cli("import", str(renamed), data_dir=src)
    assert taken.returncode == 1 and "of this file's items under another team" in taken.stderr, taken.stderr
    assert status_json(src)["graph_counts"] == before["graph_counts"]

    copied = cli("import", str(export), "--as-team", "copy", data_dir=src)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.startswith("imported team platform as team copy: ")
    listed = {
        team: sorted(
            (p["statement"], p["status"])
            for p in json.loads(
                cli("patterns", "list", "--team", team, "--limit", "500", "--json", data_dir=src).stdout
            )
        )
        for team in ("platform", "copy")
    }
    assert listed["copy"] == listed["platform"] and listed["copy"]
    after = status_json(src)["vector_counts"]
    assert after["copy"] == after["platform"] == before["vector_counts"]["platform"]


def test_ingest_of_an_id_another_team_used_quotes_nothing_of_its_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    secret = {"id": "tg-42-1001", "team": "platform", "channel": "payroll", "author": "lena", "provenance": "human"}
    secret |= {"text": "salaries move to the 25th", "ts": "2026-11-27T10:17:00+01:00"}
    mine = tmp_path / "platform.jsonl"
    mine.write_text(json.dumps(secret) + "\n")
    assert cli("ingest", str(mine), data_dir=data).returncode == 0
    theirs = tmp_path / "ops.jsonl"
    theirs.write_text(json.dumps(secret | {"team": "ops", "channel": "infra", "author": "olaf"}) + "\n")
    refused = cli("ingest", str(theirs), data_dir=data)
    assert refused.returncode == 1
    assert "ops.jsonl:1: field 'id': id 'tg-42-1001' is already used by another message" in refused.stderr
    for leak in ("platform", "payroll", "lena"):
        assert leak not in refused.stderr + refused.stdout


def test_recall_or_list_of_a_team_with_no_data_says_so_and_names_the_nearest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    good = tmp_path / "eps.jsonl"
    good.write_text(episodes(3))
    assert cli("ingest", str(good), data_dir=data).returncode == 0
    for args in (("recall", "review pull requests", "--team", "platfrom"), ("patterns", "list", "--team", "platfrom")):
        res = cli(*args, data_dir=data)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert res.stderr.strip().endswith(
            "team 'platfrom' has no data at all (nothing was ever ingested for it): check the name "
            "— did you mean 'platform'?"
        ), res.stderr
        assert res.stdout == ""
    known = cli("recall", "review pull requests", "--team", "platform", data_dir=data)
    assert known.returncode == 0 and "review pull requests" in known.stdout, known.stderr
    nothing = cli("patterns", "list", "--team", "platform", data_dir=data)  # no night yet: a real, empty list
    assert nothing.returncode == 0 and nothing.stdout.strip() == "(no patterns)", nothing.stderr
