"""`patterns`, `forget`, `export` and `import` in a subprocess, as a person runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import cli, status_json


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
