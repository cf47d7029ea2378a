"""The CLI in a subprocess, as a user runs it, on the embedded default stores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import service_unavailable
from tests.e2e.shell import as_from_a_shell

ROOT = Path(__file__).resolve().parents[2]


def cli(
    *args: str,
    data_dir: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    full_env["HF_HUB_OFFLINE"] = "1"
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "taskzilla_sleep", *args]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT)


def episodes(n: int, bad_line: int | None = None) -> str:
    out = []
    for i in range(1, n + 1):
        obj = {
            "team": "platform",
            "channel": "dev",
            "author": f"person{i}",
            "text": f"we always review pull requests within a day, note {i}",
            "ts": f"2026-11-30T10:{i:02d}:00+01:00",
            "provenance": "human",
        }
        if i == bad_line:
            obj["provenance"] = "robot"
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


def status_json(data_dir: Path) -> dict:  # type: ignore[type-arg]
    res = cli("status", "--json", data_dir=data_dir)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_version_and_usage_errors() -> None:
    assert cli("--version").stdout.startswith("taskzilla-sleep ")
    res = cli("frobnicate")
    assert res.returncode == 2 and "invalid choice" in res.stderr


def test_ingest_reingest_and_bad_seventh_line(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(episodes(10))
    first = cli("ingest", str(good), data_dir=tmp_path / "data")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "10 new, 0 already present, 0 skipped by write discipline"
    again = cli("ingest", str(good), "--progress", "json", data_dir=tmp_path / "data")
    assert again.stdout.strip() == "0 new, 10 already present, 0 skipped by write discipline"
    told = [json.loads(ln) for ln in again.stderr.splitlines() if '"event": "progress"' in ln]
    assert told[0]["note"] == "10 lines read, 10 episodes valid; 10 already present, 0 skipped; writing the graph"
    assert told[-1]["final"] and told[-1]["totals"] == {
        "new": 0,
        "present": 10,
        "skipped": 0,
        "skipped_by_connector": {},
        "edited": 0,
        "edits_ignored": 0,
        "vectors_repaired": 0,
        "lines": 10,
        "vectors_written": 0,
    }

    bad = tmp_path / "bad.jsonl"
    bad.write_text(episodes(12, bad_line=7).replace("note", "other note"))
    res = cli("ingest", str(bad), data_dir=tmp_path / "data")
    assert res.returncode == 1
    assert f"{bad}:7: field 'provenance': must be one of human, bot, ai-draft, import" in res.stderr
    st = status_json(tmp_path / "data")
    assert st["graph_counts"]["episodes"] == {"raw": 10}
    assert st["vector_counts"] == {"platform": {"episodes": 10, "patterns": 0}}


def test_ingest_of_a_thread_then_its_edits_says_what_it_did(tmp_path: Path) -> None:
    def msg(i: str, text: str, **more: str) -> str:
        base = {"id": f"tg-1-{i}", "team": "platform", "channel": "dev", "author": f"p{i}", "text": text}
        return json.dumps(base | {"ts": "2026-11-30T10:00:00+01:00", "provenance": "human"} | more)

    week = tmp_path / "week.jsonl"
    week.write_text(msg("1", "do we squash merges?") + "\n" + msg("2", "yes, always", reply_to="tg-1-1") + "\n")
    assert cli("ingest", str(week), data_dir=tmp_path / "data").returncode == 0
    edit = tmp_path / "edit.jsonl"
    edit.write_text(msg("2", "yes, always squash", reply_to="tg-1-1", edited_at="2026-11-30T10:05:00+01:00") + "\n")

    res = cli("ingest", str(edit), "--json", data_dir=tmp_path / "data")

    assert res.returncode == 0, res.stderr
    assert {k: json.loads(res.stdout)[k] for k in ("new", "edited", "present")} == {"new": 0, "edited": 1, "present": 0}
    again = cli("ingest", str(edit), data_dir=tmp_path / "data")
    assert again.stdout.strip() == "0 new, 1 already present, 0 skipped by write discipline"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(msg("3", "fine") + "\n" + msg("2", "no", edited_at="2026-11-30T09:00:00+01:00") + "\n")
    refused = cli("ingest", str(bad), data_dir=tmp_path / "data")
    assert refused.returncode == 1
    assert f"{bad}:2: field 'edited_at': 2026-11-30T09:00:00+01:00 is before the message's ts" in refused.stderr


def test_a_nul_in_the_last_of_600_lines_is_one_error_line_and_nothing_is_written(tmp_path: Path) -> None:
    rows = [
        {
            "team": "platform",
            "channel": "dev",
            "author": f"person{i % 9}",
            "text": f"release note {i}",
            "ts": f"2026-11-30T{8 + i // 60:02d}:{i % 60:02d}:00+01:00",
            "provenance": "human",
        }
        for i in range(600)
    ]
    rows[-1]["text"] += "\u0000"  # written by json.dumps as the escape \u0000, as a bot's JSON would
    f = tmp_path / "nul.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    res = cli("ingest", str(f), "--now", "2026-11-30T18:00:00+01:00", data_dir=tmp_path / "data")
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"taskzilla-sleep: {f}:600: field 'text': character 17 is U+0000 (NUL), which the stores cannot hold"
    ]
    assert not (tmp_path / "data").exists()  # validated before any store was opened
    check = cli("reconcile", "--check", "--json", data_dir=tmp_path / "data")
    assert check.returncode == 0 and json.loads(check.stdout)["by_team"] == {}


def test_ctrl_c_mid_ingest_says_what_was_stored_and_exits_130(tmp_path: Path) -> None:
    rows = [
        {
            "team": "platform",
            "channel": "dev",
            "author": "ana",
            "text": f"deploy note {i}",
            "ts": "2026-11-30T10:00:00Z",
        }
        for i in range(300)
    ]
    f = tmp_path / "big.jsonl"
    f.write_text("\n".join(json.dumps(r | {"provenance": "human"}) for r in rows) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | {"HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "taskzilla_sleep", "ingest", str(f), "--progress", "--data-dir", str(tmp_path / "d")]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=as_from_a_shell
    )
    assert proc.stderr is not None
    seen = []
    for ln in proc.stderr:
        seen.append(ln.rstrip("\n"))
        if "embedding 300" in ln:  # the graph write committed; the vectors are being written
            proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, seen
    assert seen[-1].startswith(f"taskzilla-sleep: interrupted: 300 new episodes from {f} were stored"), seen
    assert "re-run the same command to finish the job" in seen[-1] and "reconcile" in seen[-1]


def test_ingest_from_stdin_with_json_output(tmp_path: Path) -> None:
    res = cli("ingest", "-", "--json", data_dir=tmp_path / "d", stdin=episodes(3))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["new"] == 3


def test_missing_file_is_exit_1(tmp_path: Path) -> None:
    res = cli("ingest", str(tmp_path / "nope.jsonl"), data_dir=tmp_path / "d")
    assert res.returncode == 1 and "cannot read" in res.stderr


def test_invalid_config_exits_2_with_one_line(tmp_path: Path) -> None:
    res = cli("status", data_dir=tmp_path, env={"TASKZILLA__DISTILL__CONFIDENCE_FLOOR": "high"})
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "distill.confidence_floor = 'high' (from TASKZILLA__DISTILL__CONFIDENCE_FLOOR)" in lines[0]
    res = cli("status", "--set", "graph.backend=mongo", data_dir=tmp_path)
    assert res.returncode == 2 and "graph.backend = 'mongo' (from command line)" in res.stderr


def test_status_exits_1_when_a_backend_is_unreachable(tmp_path: Path) -> None:
    res = cli(
        "status",
        "--set",
        "graph.backend=neo4j",
        "--set",
        "graph.neo4j_uri=bolt://127.0.0.1:1",
        "--set",
        "graph.connect_timeout_s=2",
        data_dir=tmp_path,
    )
    assert res.returncode == 1
    assert "graph:" in res.stdout and "UNREACHABLE" in res.stdout and "127.0.0.1:1" in res.stdout
    assert "vectors:  chroma-embedded" in res.stdout


def test_reconcile_finds_and_repairs_a_vector_deleted_behind_our_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    f = tmp_path / "e.jsonl"
    f.write_text(episodes(5))
    assert cli("ingest", str(f), data_dir=data).returncode == 0
    # Delete one episode vector directly in Chroma, as an operator or a bug might.
    script = (
        "import sys, chromadb; from taskzilla_sleep.stores.embeddings import OfflineMiniLM;"
        "c = chromadb.PersistentClient(path=sys.argv[1]);"
        "col = c.get_collection('tz_platform_episodes', embedding_function=OfflineMiniLM());"
        "ids = sorted(col.get()['ids']); col.delete(ids=[ids[0]]); print(ids[0])"
    )
    gone = subprocess.run(
        [sys.executable, "-c", script, str(data / "chroma")], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert gone.startswith("ep_")
    check = cli("reconcile", "--check", "--json", data_dir=data)
    assert check.returncode == 1
    assert json.loads(check.stdout)["by_team"]["platform"]["episodes"]["missing_vectors"] == 1
    fix = cli("reconcile", data_dir=data)
    assert fix.returncode == 0 and "1 missing vectors" in fix.stdout and "repaired 1" in fix.stdout
    after = cli("reconcile", "--check", data_dir=data)
    assert after.returncode == 0 and "0 missing vectors, 0 orphan vectors" in after.stdout


def test_demo_runs_with_networking_unavailable(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        service_unavailable("unshare -rn is not available to cut the network")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    env.update(HF_HUB_OFFLINE="0", TASKZILLA_DATA_DIR=str(tmp_path / "demo"))  # offline must not depend on it
    res = subprocess.run(
        ["unshare", "-rn", sys.executable, "-m", "taskzilla_sleep", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "ingest: " in res.stdout and "skipped by write discipline" in res.stdout
    assert "graph:    falkordb" in res.stdout and "vectors:  chroma-embedded" in res.stdout
    again = cli("ingest", str(ROOT / "taskzilla_sleep/data/sample_week.jsonl"), data_dir=tmp_path / "demo")
    assert again.stdout.startswith("0 new, ")


def test_kill_9_of_a_process_holding_the_embedded_graph_leaves_no_redis(tmp_path: Path) -> None:
    script = (
        "import sys, time; from taskzilla_sleep.core.settings import load_settings;"
        "from taskzilla_sleep.app import build;"
        "s = build(load_settings(env={'TASKZILLA_DATA_DIR': sys.argv[1]}));"
        "print('ready', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = iter(proc.stdout.readline, "")
        assert any(line.strip() == "ready" for line in lines)  # log lines may come first
        redis_pid = int((tmp_path / "falkordb" / "redis.pid").read_text().strip())
        os.kill(redis_pid, 0)  # alive while its parent is
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{redis_pid}").exists():
            state = (
                Path(f"/proc/{redis_pid}/stat").read_text().split()[2] if Path(f"/proc/{redis_pid}").exists() else "X"
            )
            if state == "Z":
                break
            time.sleep(0.1)
        alive = Path(f"/proc/{redis_pid}").exists() and Path(f"/proc/{redis_pid}/stat").read_text().split()[2] != "Z"
        assert not alive, f"redis-server {redis_pid} outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
