"""Runs the crash-test scenario in one process, resuming after the last finished stage.

    python -m tests.crash_driver PROGRESS_FILE [--fresh] [--snapshot]

Settings come from the environment (TASKZILLA_DATA_DIR, TASKZILLA__GRAPH__BACKEND, ...), exactly
as for the CLI. ``TASKZILLA_CRASH_AT`` arms a crash point (see taskzilla_sleep/faults.py); the
test then runs this driver again, unarmed, to finish — as an operator would rerun after a crash.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from taskzilla_sleep import facts
from taskzilla_sleep.app import Services, build
from taskzilla_sleep.cli import sample_lines
from taskzilla_sleep.logs import configure_logging
from taskzilla_sleep.pipeline import run_night
from taskzilla_sleep.reconcile import reconcile
from taskzilla_sleep.settings import Secrets, load_settings

NIGHT = datetime.fromisoformat("2026-11-28T03:05:00+01:00")


def _night(at: datetime) -> Callable[[Services], None]:
    def run(s: Services) -> None:
        res = run_night(settings=s.settings, graph=s.graph, vectors=s.vectors, embedder=s.embedder, llm=s.llm, now=at)
        if not res.ok:
            raise SystemExit(f"night {at} failed: {[x.error for x in res.run.steps]}")

    return run


STAGES: list[tuple[str, Callable[[Services], None]]] = [
    ("ingest", lambda s: s.ingestor(clock=lambda: NIGHT).ingest_lines(sample_lines(), "sample") and None),
    (
        "pin",
        lambda s: (
            facts.pin(
                s.graph, s.vectors, "platform", "Martin Vos is the engineering manager.", "martin", NIGHT, "martin"
            )
            and None
        ),
    ),
    ("night1", _night(NIGHT)),
    ("night2", _night(NIGHT + timedelta(hours=73))),
    ("night3", _night(NIGHT + timedelta(days=32))),
]


def main(argv: list[str]) -> int:
    configure_logging(level="warning", json=True)  # logs to stderr; stdout carries the snapshot
    progress = Path(argv[0])
    with build(load_settings(), Secrets.from_env({})) as s:
        if "--fresh" in argv:
            s.graph.delete_all()
            s.vectors.delete_all()
            s.graph.ensure_schema()
        done = set(progress.read_text().split()) if progress.exists() else set()
        for name, stage in STAGES:
            if name in done:
                continue
            stage(s)
            with progress.open("a") as f:
                f.write(name + "\n")
        if "--snapshot" in argv:
            drift = reconcile(s.graph, s.vectors, repair=False).drift
            vecs = {
                f"{t}/{k}": sorted(s.vectors.present(t, k))  # type: ignore[arg-type]
                for t in s.vectors.teams()
                for k in ("episodes", "patterns")
            }
            print(json.dumps({"graph": s.graph.export(), "vectors": vecs, "drift": drift}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
