"""worker-<pid>.json: one file per replica, and readers take only live ones."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from taskzilla_sleep.runtime import presence


def test_each_replica_has_its_file_and_a_dead_ones_is_skipped_and_removed(tmp_path: Path) -> None:
    mine = presence.announce(tmp_path, {"api": "http://127.0.0.1:8765"})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # a process that has exited
    left = presence.presence_file(tmp_path, dead_pid)
    left.write_text(json.dumps({"pid": dead_pid, "host": socket.gethostname(), "api": "http://127.0.0.1:1"}))
    far = presence.presence_file(tmp_path, dead_pid + 1)  # another machine's: not judged from here
    far.write_text(json.dumps({"pid": dead_pid + 1, "host": "elsewhere", "api": "http://10.0.0.9:8765"}))
    (tmp_path / "worker-junk.json").write_text("{not json")

    found = presence.live_workers(tmp_path)
    assert sorted(w["api"] for w in found) == ["http://10.0.0.9:8765", "http://127.0.0.1:8765"]
    assert not left.exists() and mine.exists()
    presence.withdraw(tmp_path)
    assert not mine.exists() and [w["host"] for w in presence.live_workers(tmp_path)] == ["elsewhere"]
