"""Replays the crash-test week once, on fresh stores, and prints everything it wrote as one JSON line.

    python -m tests.replay_driver

Settings come from the environment, as for tests/crash_driver.py. The scenario is that driver's
(ingest the sample with a fixed clock, pin a fact, night 1, night 2 at +73 h, night 3 at +32 days),
with a few episodes added that put ties in front of the decisions (see TIES). The snapshot holds the
graph (every node and relationship; the run ledger without its wall-clock times and run ids), the
vectors (id, document, metadata and a digest of the vector the steps get) and the memory files under
DATA_DIR/memory/, then what recall answers to a few questions. Two runs that decide alike print
the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.core.settings import Secrets, load_settings
from taskzilla_sleep.memory.recall import recall
from tests.crash_driver import NIGHT, STAGES

# One habit stated three times in #ops and three times in #dev, naming no project, tool or tag: the
# pattern's topic comes from its main channel, and both channels are main. #ops already holds two
# active beliefs, so whichever channel wins also decides whether topics/ops.md is written.
TIES = [
    ("ops", "anna", "Please write the incident summary in the shared postmortem document within two days."),
    ("dev", "jonas", "Write the incident summary in the shared postmortem document within two days, please."),
    ("ops", "priya", "The incident summary goes into the shared postmortem document within two days."),
    ("dev", "anna", "Incident summaries belong in the shared postmortem document, written within two days."),
    ("ops", "jonas", "Within two days, write the incident summary into the shared postmortem document."),
    ("dev", "priya", "We write every incident summary in the shared postmortem document within two days."),
]


def tie_lines() -> list[str]:
    return [
        json.dumps(
            {
                "team": "platform",
                "channel": channel,
                "author": author,
                "text": text,
                "ts": f"2026-11-26T1{i}:30:00+01:00",
                "provenance": "human",
            }
        )
        for i, (channel, author, text) in enumerate(TIES)
    ]


# What the bot would ask after the week (results, their order and their scores are compared too).
RECALL_QUERIES = ("where do incident summaries go?", "can we deploy on a Friday?", "how does standup work?")
RECALL_AT = NIGHT + timedelta(days=33)

# Wall-clock fields of the run ledger: they differ between any two runs, whatever was decided.
_RUN_CLOCK = ("id", "started_at", "finished_at")
_STEP_CLOCK = ("started_at", "finished_at")


def graph_snapshot(s: Services) -> dict[str, list[Any]]:
    dump = s.graph.snapshot(skip_labels=frozenset())
    nodes = []
    for n in dump["nodes"]:
        props = dict(n["props"])
        if "Archived" in n["labels"]:  # keyed by the run's id (a wall-clock hash): the rest is decided
            props.pop("key")
            props.pop("change")
            # An episode's image holds which ingest stored it: a process id, as the snapshot's own.
            image = json.loads(props["props"])
            image.pop("ingest", None)
            props["props"] = image
            props.pop("bytes")  # of the JSON with that id
        if "Change" in n["labels"]:
            for k in ("id", "recorded_at", "seq"):
                props.pop(k)
        if "Run" in n["labels"]:
            for k in _RUN_CLOCK:
                props.pop(k)
            props["steps_json"] = [
                {k: v for k, v in step.items() if k not in _STEP_CLOCK} for step in json.loads(props["steps_json"])
            ]
            props["extra_json"] = json.loads(props["extra_json"])
        nodes.append({"labels": n["labels"], "props": props})
    return {"nodes": sorted(nodes, key=_canonical), "relationships": dump["relationships"]}


def vector_snapshot(s: Services) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for team in s.vectors.teams():
        for kind in ("episodes", "patterns"):
            # Its current generation (a rebuild writes tz_{team}_{kind}_gN and switches to it).
            current = s.vectors._current(f"tz_{team}_{kind}")  # type: ignore[attr-defined]
            collection = s.vectors._collection(current, create=False)  # type: ignore[attr-defined]
            if collection is None:
                continue
            got = collection.get(include=["documents", "metadatas"])
            # The vectors as the store hands them to the steps (float64), not as Chroma keeps them.
            vectors = s.vectors.embeddings(team, kind, got["ids"])
            out[f"{team}/{kind}"] = sorted(
                [i, doc, meta, hashlib.sha256(np.asarray(vectors[i], dtype="<f8").tobytes()).hexdigest()[:16]]
                for i, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
            )
    return out


def memory_snapshot(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text(encoding="utf-8") for p in sorted(directory.rglob("*.md"))}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def main(argv: list[str]) -> int:
    configure_logging(level="warning", json=True)  # logs to stderr; stdout carries the snapshot
    settings = load_settings()
    with build(settings, Secrets.from_env({})) as s:
        s.graph.delete_all()
        s.vectors.delete_all()
        s.graph.ensure_schema()
        s.ingestor(clock=lambda: NIGHT).ingest_lines(tie_lines(), "ties")
        for _name, stage in STAGES:
            stage(s)
        snapshot = {
            "backends": f"{s.graph.backend}+{s.vectors.backend}",  # not compared: says what ran
            "graph": graph_snapshot(s),
            "vectors": vector_snapshot(s),
            "memory": memory_snapshot(settings.memory_dir),
        }
        # Last: recall marks what it returns as accessed, a write the snapshot above must not see.
        snapshot["recall"] = {
            q: [item.model_dump() for item in recall(s.graph, s.vectors, q, RECALL_AT)] for q in RECALL_QUERIES
        }
    print(_canonical(snapshot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
