"""Which workers run on a data dir, and where their API listens: one ``worker-<pid>.json`` each.

A single ``worker.json`` was overwritten by a second replica and then pointed at a dead one. Each
worker now writes its own file (atomically) when its API is up and removes it when it stops; readers
take the files of live processes. A file left by a ``kill -9`` on this machine (same host, pid gone)
is skipped and removed; one from another host is kept (its liveness cannot be judged from here).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from taskzilla_sleep.core.host import pid_alive

PREFIX = "worker-"


def presence_file(data_dir: Path, pid: int | None = None) -> Path:
    return data_dir / f"{PREFIX}{pid if pid is not None else os.getpid()}.json"


def announce(data_dir: Path, info: dict[str, Any]) -> Path:
    """Write this process's file (pid and host added); returns its path."""
    path = presence_file(data_dir)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(info | {"pid": os.getpid(), "host": socket.gethostname()}))
    os.replace(tmp, path)  # a reader never sees half a file
    return path


def withdraw(data_dir: Path) -> None:
    presence_file(data_dir).unlink(missing_ok=True)


def live_workers(data_dir: Path) -> list[dict[str, Any]]:
    """The workers of ``data_dir`` that are (or may be) alive, newest file first."""
    host = socket.gethostname()
    found: list[tuple[float, dict[str, Any]]] = []
    for path in data_dir.glob(f"{PREFIX}*.json"):
        try:
            info = json.loads(path.read_text())
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            continue  # removed meanwhile, or not ours
        if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
            continue
        if info.get("host") == host and not pid_alive(info["pid"]):
            path.unlink(missing_ok=True)  # a killed worker's leftover
            continue
        found.append((mtime, info))
    return [info for _, info in sorted(found, key=lambda t: -t[0])]
