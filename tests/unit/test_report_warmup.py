"""A normal first week is not BAD: the memory index filling up from nothing is not churn.

The week is the bundled sample week, ingested a day at a time and consolidated each night after
(offline model, the real MiniLM embedder, the in-memory stores), as a new team's first week goes.
A real regression afterwards (the index losing most of what it held) still reads BAD (exit 1).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.models import PatternStatus
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.memory.admin.forget import forget_pattern
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.observe.report.model import build_report
from taskzilla_sleep.observe.report.signals import memory_index_signal
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import Embedder

AMS = ZoneInfo("Europe/Amsterdam")
CAP = 50


def _report(s: Services) -> tuple[int, dict[str, str], list[int] | None]:
    r = build_report(s.graph, 14, index_cap=CAP, grace_days=3.0)
    return r.exit_code, {x.name: x.verdict for x in r.signals}, r.memory_index_sizes


def test_first_week_is_not_bad_and_a_later_collapse_is(
    tmp_path: Path, sample_file: Path, offline_embedder: Embedder
) -> None:
    days: dict[str, list[str]] = defaultdict(list)
    for line in sample_file.read_text(encoding="utf-8").splitlines():
        days[datetime.fromisoformat(json.loads(line)["ts"]).date().isoformat()].append(line)
    s = Services(Settings(data_dir=tmp_path), MemoryGraphStore(), MemoryVectorStore(offline_embedder), offline_embedder)
    night = datetime.now(AMS)
    for day, lines in sorted(days.items()):
        evening = datetime.fromisoformat(day).replace(hour=20, tzinfo=AMS)
        s.ingestor(lambda t=evening: t).ingest_lines(lines, f"{day}.jsonl")
        night = (evening + timedelta(days=1)).replace(hour=3, minute=5)
        assert run_night(s, NightRequest(now=night)).ok

    code, verdicts, sizes = _report(s)
    assert sizes is not None and sizes[0] == 0 and sizes[-1] >= 3, sizes
    # What used to read BAD: a change of more than 50 % between two nights (0 -> N, 1 -> 3 ...).
    assert any(b > 1.5 * max(a, 1) for a, b in zip(sizes, sizes[1:], strict=False)), sizes
    assert verdicts["memory_index"] == "ok", verdicts
    assert "bad" not in verdicts.values() and code == 0, verdicts

    # A regression after it: most of the index's beliefs are gone by the next night.
    live = [p for p in s.graph.patterns("platform") if p.status is PatternStatus.ACTIVE]
    for p in live[1:]:
        forget_pattern(s.graph, s.vectors, "platform", p.id, "ops", "a bad import", night)
    assert run_night(s, NightRequest(now=night + timedelta(days=1))).ok
    code, verdicts, after = _report(s)
    assert after is not None and after[-1] < after[-2] / 2, after
    assert verdicts["memory_index"] == "bad" and code == 1, verdicts


@pytest.mark.parametrize(
    ("sizes", "verdict"),
    [
        ([0, 0, 1, 4, 9], "ok"),  # a first week: filling
        ([0, 3, 10, 24, 40], "ok"),  # every growth began under half the cap (25)
        ([0, 4, 1], "bad"),  # a shrink is judged while filling too
        ([30, 48], "bad"),  # past half the cap, +60 % in a night is churn
        ([30, 38], "watch"),
        ([20, 40, 44, 45], "ok"),  # filled, then steady
        ([12, 0], "bad"),
    ],
)
def test_growth_is_judged_only_once_the_index_is_half_full(sizes: list[int], verdict: str) -> None:
    got = memory_index_signal(sizes, CAP)
    assert got.verdict == verdict, got.reason
