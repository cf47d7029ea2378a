"""The oracle model as docs/guides/model.md documents it: ``python -m ops.bench.oracle`` serving a week's gold,
the product pointed at it with two ``--set`` flags and no API key in the environment."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ops.bench import oracle_gold
from tests.e2e.test_cli import ROOT, cli

WEEK = "w11"  # the richest week for the oracle today: five gold keys reach the model
NIGHT = "2026-03-02T03:05:00+13:00"  # the morning after the week's last day, in its own zone


def _serving(server: subprocess.Popen[str], within_s: float = 60.0) -> tuple[str, list[str], threading.Thread]:
    """The URL the oracle prints once it listens; the list its output lines go to; the thread reading them."""
    said: list[str] = []

    def read() -> None:
        for line in server.stdout or ():
            said.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and (server.poll() is None or reader.is_alive()):
        for line in list(said):
            m = re.search(r"serving (http://127\.0\.0\.1:\d+/v1)", line)
            if m:
                return m.group(1), said, reader
        time.sleep(0.1)
    raise AssertionError(f"the oracle did not say where it serves: {said!r}")


def test_the_documented_oracle_command_runs_a_night_with_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # cli() and the server inherit this environment
    stats = tmp_path / "oracle-stats.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    server = subprocess.Popen(
        [sys.executable, "-m", "ops.bench.oracle", "--week", WEEK, "--stats", str(stats)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        url, said, reader = _serving(server)
        data = tmp_path / "data"
        ingested = cli("ingest", str(oracle_gold.CORPUS / f"{WEEK}.jsonl"), "--no-progress", data_dir=data)
        assert ingested.returncode == 0, ingested.stderr[-2000:]
        night = cli(
            "run-once",
            "--now",
            NIGHT,
            "--set",
            "llm.model=openai/oracle",
            "--set",
            f"llm.api_base={url}",
            data_dir=data,
        )
        assert night.returncode == 0, night.stderr[-3000:]
        listed = cli("patterns", "list", "--team", "w11-fareapp", data_dir=data)
        assert listed.returncode == 0, listed.stderr[-2000:]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    err = server.stderr.read() if server.stderr else ""
    assert server.returncode == 0, err[-2000:]
    reader.join(timeout=10)
    assert any(x.startswith("oracle: stopped;") for x in said), said

    asked = json.loads(stats.read_text())
    assert asked["distill_calls"] >= 1 and asked["answered"], asked
    gold = oracle_gold.build(WEEK).gold
    statements = {gold.beliefs[k].statement for k in asked["answered"]}
    # What the oracle answered reached the stores as written (the guards may refuse some of it).
    assert any(s in listed.stdout for s in statements), (statements, listed.stdout[-2000:])
    assert "sk-loopback-no-key" not in night.stderr + night.stdout
