"""`taskzilla-sleep demo`: a full offline night over the bundled sample week on the embedded stores.

No server to install and no network: FalkorDB as a child process, Chroma on disk, the offline
embedder and the offline model, whatever the configuration says about backends.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.memory.ingest import episode_lines

if TYPE_CHECKING:
    from taskzilla_sleep.interfaces.status import StatusReport

SAMPLE = "data/sample_week.jsonl"
DEMO_NIGHT = "2026-11-28T03:05:00+01:00"  # the Saturday night after the bundled week
TEAM = "platform"


def sample_lines() -> list[str]:
    return episode_lines(resources.files("taskzilla_sleep").joinpath(SAMPLE).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class DemoResult:
    text: str
    data: dict[str, Any]
    ok: bool


def embedded(settings: Settings, data_dir: Path) -> Settings:
    """``settings`` on the embedded defaults, offline, in ``data_dir``."""
    return settings.model_copy(
        update={
            "data_dir": data_dir,
            "graph": settings.graph.model_copy(update={"backend": "falkordb"}),
            "vector": settings.vector.model_copy(update={"backend": "chroma-embedded"}),
            "embeddings": settings.embeddings.model_copy(update={"provider": "offline"}),
            "llm": settings.llm.model_copy(update={"model": None}),
        }
    )


GONE = "<temporary folder, removed>"


def _without(folder: str, text: str) -> str:
    """``text`` with every path inside ``folder`` (the demo's temporary folder) replaced by GONE."""
    return re.sub(re.escape(folder) + r"(?:/[^\s\"',)]*|(?![\w-]))", GONE, text)


def stores_summary(status: StatusReport, pinned: int) -> list[str]:
    """The stores after the demo night in two lines: each store's health, then the memory's sizes with
    one count of beliefs (distilled tonight and the pinned facts; `status` shows the full report)."""
    lines = [h.line() for h in (status.graph, status.vectors)]
    c = status.graph_counts
    if c is not None:
        patterns = sum(c.patterns.values())
        by_status = ", ".join(f"{k} {n}" for k, n in sorted(c.patterns.items()))
        episodes = ", ".join(f"{k} {n}" for k, n in sorted(c.episodes.items()))
        open_ = c.contradictions.get("open", 0)
        lines.append(
            f"memory:   {sum(c.episodes.values())} episodes ({episodes}); {patterns} patterns "
            f"({patterns - pinned} distilled + {pinned} pinned fact; {by_status}); "
            f"{open_} open contradiction{'' if open_ == 1 else 's'}"
        )
    return lines


def run_demo(settings: Settings, secrets: Secrets, keep_dir: bool) -> DemoResult:
    """The demo night: in ``settings.data_dir`` when ``keep_dir`` (the user chose it), else in a
    temporary folder removed at the end."""
    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.status import collect_status
    from taskzilla_sleep.memory import facts
    from taskzilla_sleep.night.pipeline import NightRequest, run_night
    from taskzilla_sleep.observe.report.night import render_night

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder is bundled: never reach for the model hub
    tmp = None if keep_dir else tempfile.TemporaryDirectory(prefix="taskzilla-demo-")
    demo = embedded(settings, Path(tmp.name) if tmp else settings.data_dir)
    now = datetime.fromisoformat(DEMO_NIGHT)
    try:
        with build(demo, secrets) as s:
            report = s.ingestor(clock=lambda: now).ingest_lines(sample_lines(), f"taskzilla_sleep/{SAMPLE}")
            fact = facts.pin(
                s.graph,
                s.vectors,
                TEAM,
                "Martin Vos is the engineering manager of the platform team.",
                by="martin",
                now=now,
                entity="martin",
            )
            result = run_night(s, NightRequest(now=now, trigger="demo"))
            night = render_night(result, s.graph)
            # The stores already open answer the status (re-opening the embedded server right after
            # closing it only adds a restart to the demo).
            status = collect_status(demo, secrets, s.graph, s.vectors)
        index = demo.memory_dir / TEAM / "MEMORY.md"
        where = "a temporary folder (removed on exit; keep them with --data-dir DIR)" if tmp else str(demo.data_dir)
        text = "\n".join(
            [
                f"demo: the bundled sample week of team '{TEAM}', embedded stores in {where}",
                f"ingest: {report.summary()}",
                f"pinned fact: {fact.id} {fact.statement}",
                "",
                night,
                "",
                f"memory index the bot loads: {index if tmp is None else 'MEMORY.md in ' + GONE}",
                *(f"  {line}" for line in index.read_text("utf-8").splitlines() if line.startswith("- ")),
                "",
                *stores_summary(status, pinned=1),
            ]
        )
        data = (
            {"ingest": {"new": report.new, "present": report.present, "skipped": report.skipped}}
            | {"night": result.run.model_dump(mode="json")}
            | {"status": status.model_dump(mode="json")}
        )
        if tmp is not None:  # its folder is removed below: name no path in it, as if it were still there
            text, data = _without(tmp.name, text), json.loads(_without(tmp.name, json.dumps(data)))
        return DemoResult(text, data, status.healthy and result.ok)
    finally:
        if tmp is not None:
            tmp.cleanup()
