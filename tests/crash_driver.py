"""Runs the crash-test scenario in one process, resuming after the last finished stage.

    python -m tests.crash_driver PROGRESS_FILE [--fresh] [--snapshot] [--busy | --undo] [--stop-after STAGE]

Settings come from the environment (TASKZILLA_DATA_DIR, TASKZILLA__GRAPH__BACKEND, ...), exactly
as for the CLI. ``TASKZILLA_CRASH_AT`` arms a crash point (see taskzilla_sleep/core/faults.py); the
test then runs this driver again, unarmed, to finish — as an operator would rerun after a crash.
The default scenario is the bundled sample week over three nights (with messages delivered late);
``--busy`` is one night over a generated busy week (ops/bench/generate.py), where a distill has
dozens of patterns to write and a rerun that re-decided would group differently; ``--undo`` is the
first two nights of the default scenario and then the undo of the second. ``--stop-after STAGE`` ends
after that stage (a snapshot of the state before the undo).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.core.settings import Secrets, load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.memory import facts
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.pipeline import NightRequest, run_night

NIGHT = datetime.fromisoformat("2026-11-28T03:05:00+01:00")


def _night(at: datetime) -> Callable[[Services], None]:
    def run(s: Services) -> None:
        res = run_night(s, NightRequest(now=at))
        if not res.ok:
            raise SystemExit(f"night {at} failed: {[x.error for x in res.run.steps]}")

    return run


# Delivered the morning after night 1, timestamped the day before it (a connector catching up): night 2
# must distill them (they arrived after night 1, whatever their timestamps say).
LATE = [
    ("anna", "Release notes for every deploy go in #releases before the deploy starts."),
    ("joost", "Every deploy needs its release notes posted in #releases before it starts."),
    ("sara", "Please post the release notes of a deploy in #releases before you start it."),
    ("martin", "Before starting any deploy, post its release notes in #releases first."),
]


def _late(s: Services) -> None:
    """Four people's words over the three days before night 1, delivered after it (a connector's
    backlog): a belief of several people on several days, learned by night 2."""
    ts = NIGHT - timedelta(hours=20)
    lines = [
        json.dumps(
            {"team": "platform", "channel": "ops", "author": a, "text": t, "provenance": "human"}
            | {"ts": (ts - timedelta(days=i % 3, minutes=i)).isoformat()}
        )
        for i, (a, t) in enumerate(LATE)
    ]
    s.ingestor(clock=lambda: NIGHT + timedelta(hours=6)).ingest_lines(lines, "late")


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
    ("late", _late),
    ("night2", _night(NIGHT + timedelta(hours=73))),
    ("night3", _night(NIGHT + timedelta(days=32))),
]


def _busy_ingest(s: Services) -> None:
    from ops.bench.generate import generate

    week = generate(days=7, per_day=120, start=(NIGHT - timedelta(days=7)).date())
    s.ingestor(clock=lambda: NIGHT).ingest_lines([json.dumps(e) for e in week.episodes], "busy")


BUSY: list[tuple[str, Callable[[Services], None]]] = [("ingest", _busy_ingest), ("night1", _night(NIGHT))]


def _undo_night2(s: Services) -> None:
    """Undo the second night (it learned the late messages' belief and retired night 1's messages)."""
    from taskzilla_sleep.memory.archive import undo_run
    from taskzilla_sleep.memory.index import rebuild_memory

    (night2,) = [r for r in s.graph.runs(20) if r.now == NIGHT + timedelta(hours=73)]
    report = undo_run(
        s.graph,
        s.vectors,
        night2.id,
        "cli:ops",
        "a false belief",
        NIGHT + timedelta(hours=80),
        rebuild_index=lambda teams: rebuild_memory(s.graph, s.settings, teams),
    )
    assert report.texts > 0 and report.removed > 0, report


# Night 2 and its undo: what the undo leaves must be what night 1 left (and the late messages).
UNDO: list[tuple[str, Callable[[Services], None]]] = [*STAGES[:5], ("undo2", _undo_night2)]


def main(argv: list[str]) -> int:
    configure_logging(level="warning", json=True)  # logs to stderr; stdout carries the snapshot
    progress = Path(argv[0])
    with build(load_settings(), Secrets.from_env({})) as s:
        if "--fresh" in argv:
            s.graph.delete_all()
            s.vectors.delete_all()
            s.graph.ensure_schema()
        done = set(progress.read_text().split()) if progress.exists() else set()
        scenario = BUSY if "--busy" in argv else UNDO if "--undo" in argv else STAGES
        stop = argv[argv.index("--stop-after") + 1] if "--stop-after" in argv else None
        for name, stage in scenario:
            if name in done:
                continue
            stage(s)
            with progress.open("a") as f:
                f.write(name + "\n")
            if name == stop:
                break
        if "--snapshot" in argv:
            drift = reconcile(s.graph, s.vectors, repair=False).drift
            vecs = {
                f"{t}/{k}": sorted(s.vectors.present(t, k))  # type: ignore[arg-type]
                for t in s.vectors.teams()
                for k in ("episodes", "patterns")
            }
            # The archive's nodes hold run ids (a wall-clock hash) and what a crash left to its rerun:
            # the product's state is the rest; the ledger is left out as before.
            graph = s.graph.snapshot(skip_labels=frozenset({"Run", "Change", "Archived"}))
            print(json.dumps({"graph": graph, "vectors": vecs, "drift": drift}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
