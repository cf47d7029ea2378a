"""The ops report and the Prometheus metrics: pure rules and views on hand-built runs, no store.

The same report and metrics over a real ledger (an embedded FalkorDB) are in
tests/contract/test_report_ledger.py.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog.testing
from prometheus_client.parser import text_string_to_metric_families

from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.models import (
    Contradiction,
    Pattern,
    PatternKind,
    PatternStatus,
    Run,
    RunTrigger,
    StepName,
    StepResult,
)
from taskzilla_sleep.core.settings import DecaySettings, MemoryIndexSettings
from taskzilla_sleep.memory.facts import fact_id
from taskzilla_sleep.observe.metrics import FAMILIES, SleepCollector, render
from taskzilla_sleep.observe.report.html import write_html
from taskzilla_sleep.observe.report.model import Report, build_report
from taskzilla_sleep.observe.report.nights import Night, night_of, percentile
from taskzilla_sleep.observe.report.signals import (
    contradictions_signal,
    failed_steps_signal,
    memory_index_signal,
    merges_signal,
    pinned_facts_signal,
    store_growth_signal,
)
from taskzilla_sleep.observe.report.svg import axis_ticks
from taskzilla_sleep.observe.report.text import render_text, sparkline
from taskzilla_sleep.stores.ports import GraphCounts

T0 = datetime(2026, 11, 28, 2, 5, tzinfo=UTC)  # 03:05 in Amsterdam
STEPS: tuple[StepName, ...] = ("prune", "distill", "reflect", "decay")
# The thresholds the rules take from Settings, at their defaults (memory_index.max_entries, decay.grace_hours).
CAP = MemoryIndexSettings().max_entries
GRACE_DAYS = DecaySettings().grace_hours / 24


def make_run(
    day: int,
    *,
    merges: int = 0,
    added: int = 2,
    live: int = 100,
    total: int = 100,
    patterns: int = 10,
    open_c: int = 0,
    live_before: int | None = None,
    total_before: int | None = None,
    failed: StepName | None = None,
    lags: Sequence[float] = (),
    trigger: RunTrigger = "schedule",
    cost: float | None = 0.0,
    dry_run: bool = False,
) -> Run:
    """A finished night ``day`` days after T0, as the pipeline records it."""
    now = T0 + timedelta(days=day)
    steps = []
    at = now
    failed_seen = False
    for i, name in enumerate(STEPS):
        status = "skipped" if failed_seen else "failed" if name == failed else "ok"
        failed_seen = failed_seen or name == failed
        counts = {
            "prune": {"examined": 50, "pruned": 1},
            "distill": {"patterns_added": added, "evidence_bumps": 3, "absorbed": 9},
            "reflect": {"merges": merges, "contradictions": 0, "links": 1},
            "decay": {"retired": 4, "waiting": 2},
        }[name]
        steps.append(
            StepResult(
                step=name,
                status=status,
                started_at=at,
                finished_at=at + timedelta(seconds=1 + i),
                counts=counts if status == "ok" else {},
                llm_calls=5 if name in ("distill", "reflect") else 0,
                prompt_tokens=1000 if name in ("distill", "reflect") else 0,
                completion_tokens=200 if name in ("distill", "reflect") else 0,
                cost_usd=cost,
                error="StoreError: connection reset" if status == "failed" else None,
            )
        )
        at += timedelta(seconds=2 + i)
    sizes_after = {
        "episodes_total": total,
        "episodes_live": live,
        "vectors_episodes": live,
        "patterns_live": patterns,
        "contradictions_open": open_c,
        "tombstones": 7,
    }
    before = dict(sizes_after)
    before["vectors_episodes"] = before["episodes_live"] = live if live_before is None else live_before
    before["episodes_total"] = total if total_before is None else total_before
    return Run(
        id=f"run_{day:02d}_{trigger}",
        trigger=trigger,
        started_at=now,
        finished_at=at,
        now=now,
        dry_run=dry_run,
        steps=steps,
        slot=now.date().isoformat(),
        sizes_before=before,
        sizes_after=sizes_after,
        pattern_lags_s=list(lags),
    )


def nights_of(runs: Sequence[Run]) -> list[Night]:
    return [night_of(r) for r in runs]


def fact(statement: str = "Martin Vos is the engineering manager of the platform team.", **update: object) -> Pattern:
    p = Pattern(
        id=fact_id("platform", statement),
        team="platform",
        statement=statement,
        kind=PatternKind.FACT,
        status=PatternStatus.ACTIVE,
        confidence=1.0,
        first_seen=T0,
        last_seen=T0,
        created_at=T0,
        updated_at=T0,
        valid_from=T0,
        pinned=True,
        pinned_by="martin",
    )
    return p.model_copy(update=update)


# -- pure helpers ----------------------------------------------------------------------------------


def test_sparkline_scales_between_min_and_max_and_shows_gaps() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([10, None, 30]) == "▁ █"
    assert sparkline([0, 0, 0]) == "▁▁▁"
    assert sparkline([5, 5]) == "▄▄"  # flat but non-zero: no invented trend
    assert sparkline([None, None]) == "  "
    assert sparkline([]) == ""


def test_percentiles_interpolate_like_numpy() -> None:
    xs = [float(v) for v in range(1, 11)]
    assert percentile(xs, 50) == pytest.approx(5.5)
    assert percentile(xs, 95) == pytest.approx(9.55)
    assert percentile([42.0], 95) == 42.0
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 0) == 1.0  # order of the input does not matter


def test_axis_ticks_are_round_and_whole_for_counts() -> None:
    assert axis_ticks(5) == [0, 2, 4, 6]
    assert axis_ticks(1) == [0, 1]
    assert axis_ticks(0) == [0, 1]
    assert axis_ticks(0.48, integer=False) == pytest.approx([0, 0.2, 0.4, 0.6])
    assert axis_ticks(930)[-1] >= 930 and len(axis_ticks(930)) <= 6
    assert axis_ticks(2700, integer=False, seconds=True) == [0, 900, 1800, 2700]  # 15-minute steps, not 1000 s
    assert axis_ticks(14, integer=False, seconds=True) == [0, 5, 10, 15]


def test_night_flattens_counts_durations_and_llm_usage() -> None:
    n = night_of(make_run(0, merges=3, added=4, lags=[60, 120, 600]))
    assert (n.patterns_added, n.evidence_bumps, n.merges, n.absorbed, n.retired, n.pruned) == (4, 3, 3, 9, 4, 1)
    assert n.status == "ok" and n.llm_calls == 10 and n.tokens == 2400 and n.cost_usd == 0.0
    assert n.step("reflect") is not None and n.step("reflect").duration_s == 3.0  # type: ignore[union-attr]
    assert n.lag_p50_s == 120 and n.lag_p95_s == pytest.approx(552)
    unknown = night_of(make_run(1, cost=None))
    assert unknown.cost_usd is None  # one unknown step cost: the night's cost is unknown, not a partial sum
    broken = night_of(make_run(2, failed="reflect"))
    assert broken.status == "failed" and broken.merges == 0 and broken.step("decay").status == "skipped"  # type: ignore[union-attr]


# -- verdict rules -----------------------------------------------------------------------------------


def test_store_growth_linear_in_patterns_is_ok_and_growth_with_messages_is_bad() -> None:
    # Two weeks, 100 messages a day; decay keeps the live store flat-ish while patterns grow.
    healthy = [make_run(d, total=100 * (d + 1), live=120 + d, patterns=10 + d) for d in range(15)]
    s = store_growth_signal(nights_of(healthy), GRACE_DAYS)
    assert s.verdict == "ok", s.reason
    assert "live episodes" in s.reason and "messages +1400" in s.reason

    hoarding = [make_run(d, total=100 * (d + 1), live=100 * (d + 1), patterns=10) for d in range(15)]
    s = store_growth_signal(nights_of(hoarding), GRACE_DAYS)
    assert s.verdict == "bad" and "grows with messages" in s.reason

    week = [make_run(d, total=100 * (d + 1), live=100 * (d + 1)) for d in range(5)]
    assert store_growth_signal(nights_of(week), GRACE_DAYS).verdict == "watch"
    short = [make_run(d, total=100 * (d + 1), live=100 * (d + 1)) for d in range(2)]
    assert store_growth_signal(nights_of(short), GRACE_DAYS).verdict == "unknown"  # still inside the decay grace
    exploding = [make_run(d, total=10 * 2**d, live=10 * 2**d) for d in range(6)]
    s = store_growth_signal(nights_of(exploding), GRACE_DAYS)
    assert s.verdict == "bad" and "accelerating" in s.reason
    assert store_growth_signal(nights_of(healthy[:1]), GRACE_DAYS).verdict == "unknown"


def test_merges_trending_down_is_ok_and_rising_is_not() -> None:
    assert merges_signal(nights_of([make_run(d, merges=m) for d, m in enumerate([9, 7, 4, 2, 1])])).verdict == "ok"
    assert merges_signal(nights_of([make_run(d) for d in range(4)])).reason.startswith("0 merges in 4")
    rising = merges_signal(nights_of([make_run(d, merges=m) for d, m in enumerate([1, 1, 2, 6, 9, 12])]))
    assert rising.verdict == "bad" and "write-discipline" in rising.reason
    assert merges_signal(nights_of([make_run(d, merges=m) for d, m in enumerate([1, 1, 2, 2])])).verdict == "watch"
    assert merges_signal(nights_of([make_run(0), make_run(1)])).verdict == "unknown"
    # A night whose reflect failed found no merges; it must not count as a "0" in the trend.
    with_failure = [make_run(0, merges=5), make_run(1, merges=4), make_run(2, failed="reflect")]
    assert merges_signal(nights_of(with_failure)).verdict == "unknown"


def test_memory_index_size_signal() -> None:
    assert memory_index_signal(None, CAP).verdict == "unknown"
    assert memory_index_signal([48, 49, 50, 50], CAP).verdict == "ok"
    assert memory_index_signal([40, 50], CAP).verdict == "watch"
    assert memory_index_signal([50, 20], CAP).verdict == "bad"
    assert memory_index_signal([12, 0], CAP).verdict == "bad"
    over = memory_index_signal([50, 51], CAP)
    assert over.verdict == "bad" and "cap of 50" in over.reason


def test_pinned_facts_intact_or_unpinned_are_ok_anything_else_is_bad() -> None:
    assert pinned_facts_signal([]).verdict == "ok"
    unpinned = fact("Sara is our on-call lead.", status=PatternStatus.RETIRED, archived_reason="unpinned")
    ok = pinned_facts_signal([fact(), unpinned])
    assert ok.verdict == "ok" and "all 2" in ok.reason
    for touched, why in [
        (fact(confidence=0.9), "confidence 0.90"),
        (fact(status=PatternStatus.SUPERSEDED, superseded_by="pat_x"), "status superseded"),
        (fact(status=PatternStatus.RETIRED, archived_reason="decayed"), "status retired"),
        (fact().model_copy(update={"statement": "Martin Vos left the team."}), "statement rewritten"),
    ]:
        s = pinned_facts_signal([fact("Another fact."), touched])
        assert s.verdict == "bad" and why in s.reason and s.reason.startswith("1 of 2 touched")


def test_failed_steps_signal() -> None:
    assert failed_steps_signal([]).verdict == "unknown"
    clean = failed_steps_signal(nights_of([make_run(d) for d in range(3)]))
    assert clean.verdict == "ok" and clean.reason == "0 failed of 12 steps in 3 runs"
    last = failed_steps_signal(nights_of([make_run(0), make_run(1, failed="distill")]))
    assert last.verdict == "bad" and "distill failed: StoreError: connection reset" in last.reason
    recovered = failed_steps_signal(nights_of([make_run(0, failed="decay"), make_run(1)]))
    assert recovered.verdict == "watch" and recovered.reason == "1 failed step(s) earlier (decay), since recovered"
    running = make_run(2).model_copy(update={"finished_at": None})
    running.steps[3].status = "running"
    s = failed_steps_signal(nights_of([make_run(1), running]))
    assert s.verdict == "watch" and "has not finished" in s.reason


def test_the_report_never_says_recovered_while_distill_has_given_up_groups(tmp_path: Path) -> None:
    """Issue 27 item 5: a distill that failed earlier and a clean night since is not "recovered"
    while the groups it gave up on wait: the report says how many and how to ask them again."""
    nights = nights_of([make_run(0, failed="distill"), make_run(1)])
    held = failed_steps_signal(nights, {"platform": 4, "billing": 0})
    assert held.verdict == "watch" and "since recovered" not in held.reason
    assert held.reason == (
        "1 failed step(s) earlier (distill); distill gave up on groups without a usable answer: 4 message(s) "
        "waiting (platform 4); `taskzilla-sleep distill retry --team platform` asks again"
    )
    # Failures gone from the window, groups still given up: still not ok.
    quiet = failed_steps_signal(nights_of([make_run(d) for d in range(3)]), {"platform": 4, "ops": 2})
    assert quiet.verdict == "watch" and "6 message(s) waiting (ops 2, platform 4)" in quiet.reason
    assert "distill retry --team ops --team platform" in quiet.reason
    # Retried (nothing given up any more): recovered, as before.
    assert failed_steps_signal(nights, {}).reason == "1 failed step(s) earlier (distill), since recovered"

    report = sample_report(tmp_path, [make_run(0, failed="distill"), make_run(1)], given_up={"platform": 4})
    (signal,) = [x for x in report.signals if x.name == "failed_steps"]
    assert signal.verdict == "watch" and "since recovered" not in signal.reason and report.given_up == {"platform": 4}
    assert "distill retry --team platform" in render_text(report)


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    from taskzilla_sleep.core.errors import UsageError

    with pytest.raises(UsageError, match="at least 1"):
        build_report(EmptyLedger(), 0, index_cap=CAP, grace_days=GRACE_DAYS)
    with pytest.raises(UsageError, match="time zone"):
        build_report(EmptyLedger(), 5, index_cap=CAP, grace_days=GRACE_DAYS, tz="Mars/Olympus")


def test_open_contradictions_must_not_pile_up() -> None:
    as_of = T0 + timedelta(days=5)
    assert contradictions_signal([], 0, None, as_of).verdict == "ok"
    steady = nights_of([make_run(d, open_c=2) for d in range(5)])
    assert contradictions_signal(steady, 2, as_of - timedelta(days=2), as_of).verdict == "ok"
    old = contradictions_signal(steady, 2, as_of - timedelta(days=9), as_of)
    assert old.verdict == "watch" and "over a week" in old.reason
    piling = nights_of([make_run(d, open_c=d) for d in range(5)])
    s = contradictions_signal(piling, 5, None, as_of)
    assert s.verdict == "bad" and "piling up" in s.reason
    growing = nights_of([make_run(0, open_c=1), make_run(1, open_c=0), make_run(2, open_c=2)])
    assert contradictions_signal(growing, 2, None, as_of).verdict == "watch"
    assert contradictions_signal(steady, 12, None, as_of).verdict == "bad"


# -- views ------------------------------------------------------------------------------------------


class EmptyLedger:
    def night_runs(self, n: int) -> list[Run]:
        return []

    def teams(self) -> list[str]:
        return []

    def patterns(self, team: str) -> list[Pattern]:
        return []

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        return []


def sample_report(
    tmp_path: Path, runs: Sequence[Run], index: Sequence[int] | None = None, given_up: dict[str, int] | None = None
) -> Report:
    """A report over ``runs`` through the real builder, with a graph stand-in that holds only them."""

    class Ledger:
        def night_runs(self, n: int) -> list[Run]:
            return sorted(runs, key=lambda r: r.started_at, reverse=True)[:n]

        def teams(self) -> list[str]:
            return ["platform"]

        def patterns(self, team: str) -> list[Pattern]:
            return [fact()]

        def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
            return []

    return build_report(
        Ledger(),
        30,
        index,
        index_cap=CAP,
        grace_days=GRACE_DAYS,
        tz="Europe/Amsterdam",
        now=T0 + timedelta(days=30),
        given_up=given_up,
    )


def busy_fortnight() -> list[Run]:
    return [
        make_run(
            d,
            merges=max(0, 6 - d),
            added=3 + d % 3,
            total=400 + 120 * d,
            live=300 + 8 * d,
            live_before=300 + 8 * d + 30,
            total_before=400 + 120 * d - 120,
            patterns=12 + 2 * d,
            open_c=1 if d > 6 else 0,
            lags=[900 + 60 * d, 1800, 2400 + 30 * d],
            failed="reflect" if d == 9 else None,
        )
        for d in range(14)
    ]


def test_text_view_has_verdicts_sparklines_and_the_per_night_table(tmp_path: Path) -> None:
    report = sample_report(tmp_path, busy_fortnight(), index=[44, 46, 47, 47, 48, 50])
    text = render_text(report)
    assert text.startswith("taskzilla-sleep report: 14 runs (2026-11-28 … 2026-12-11), times in Europe/Amsterdam")
    for title in ("store growth", "merges per run", "memory index size", "pinned facts", "failed steps"):
        assert re.search(rf"\[(ok|watch|bad|unknown) *\] {title}", text), title
    assert re.search(r"live patterns +[▁▂▃▄▅▆▇█]{14}  12 → 38", text)
    assert re.search(r"memory index entries +[ ▁▂▃▄▅▆▇█]{14}  44 → 50", text)  # 6 sizes, padded to 14 nights
    assert "night             trigger   status  +pat  bumps  merges" in text
    assert "2026-12-07 03:05  schedule  failed" in text  # Amsterdam time, not UTC
    assert "FAIL 3.00" in text and "errors" in text and "reflect: StoreError: connection reset" in text
    assert report.worst == "watch" and report.exit_code == 0  # the failure was followed by clean nights


def test_json_round_trip(tmp_path: Path) -> None:
    report = sample_report(tmp_path, busy_fortnight())
    data = json.loads(json.dumps(report.model_dump(mode="json")))
    assert data["nights"][0]["now"].startswith("2026-11-28T02:05:00")  # oldest first
    assert {s["name"] for s in data["signals"]} >= {"store_growth", "merges", "pinned_facts", "contradictions"}
    assert Report.model_validate(data) == report


def well_formed(page: str) -> ET.Element:
    """The page is XHTML-clean: parse it as XML (after the HTML5 doctype) to prove every tag is closed."""
    assert page.startswith("<!DOCTYPE html>")
    return ET.fromstring(page.removeprefix("<!DOCTYPE html>"))


def test_html_is_one_self_contained_page_with_an_svg_per_chart(tmp_path: Path) -> None:
    report = sample_report(tmp_path, busy_fortnight(), index=[44, 46, 47])
    path = write_html(report, tmp_path / "out" / "report.html")
    page = path.read_text(encoding="utf-8")
    root = well_formed(page)
    svg = "{http://www.w3.org/2000/svg}svg"
    charts = root.findall(".//*[@class='chart']")
    assert len(charts) == 8  # 7 series charts + the memory index, which was given
    assert all(len(c.findall(f".//{svg}")) == 1 for c in charts)
    assert len(root.findall(f".//{svg}//{{http://www.w3.org/2000/svg}}polyline")) >= 4
    # No script, no stylesheet or image to fetch: it opens from disk with no server and no network.
    assert "<script" not in page and " src=" not in page and "<link" not in page and "@import" not in page
    assert "url(" not in page
    cards = root.findall(".//*[@class='cards']/div")
    assert len(cards) == 6 and "v-watch" in (cards[4].get("class") or "")  # failed steps: recovered
    assert not (tmp_path / "out" / "report.html.tmp").exists()


def test_html_for_an_empty_ledger_still_renders(tmp_path: Path) -> None:
    report = sample_report(tmp_path, [])
    root = well_formed(write_html(report, tmp_path / "r.html").read_text(encoding="utf-8"))
    assert root.findall(".//*[@class='chart']") == []
    assert "no runs in the ledger" in render_text(report)
    assert report.exit_code == 0 and {s.name for s in report.signals if s.verdict == "unknown"} >= {
        "store_growth",
        "merges",
        "failed_steps",
    }


# -- metrics -------------------------------------------------------------------------------------------


def scrape(registry: object) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    from prometheus_client import CollectorRegistry

    assert isinstance(registry, CollectorRegistry)
    body, content_type = render(registry)
    assert content_type.startswith("text/plain")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def collector_registry(runs: list[Run], **kw: object) -> object:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    counts = GraphCounts(episodes={"raw": 40, "absorbed": 10, "retired": 50}, contradictions={"open": 2})
    reg.register(
        SleepCollector(
            lambda n: sorted(runs, key=lambda r: r.started_at, reverse=True)[:n],
            lambda: counts.sizes(),
            index_cap=CAP,
            grace_days=GRACE_DAYS,
            **kw,  # type: ignore[arg-type]
        )
    )
    return reg


def test_metrics_expose_last_night_store_sizes_lag_and_verdicts() -> None:
    runs = [make_run(d, merges=4 - d, lags=[100.0, 300.0]) for d in range(4)]
    runs.append(make_run(4, failed="decay", lags=[500.0]))
    m = scrape(
        collector_registry(runs, outbox_pending=lambda: 3, outbox_failed=lambda: 2, memory_index_size=lambda: 47)
    )
    p = "taskzilla_sleep_"
    assert m[p + "last_night_step_duration_seconds"][(("step", "reflect"),)] == 3.0
    assert m[p + "last_night_step_failed"][(("step", "decay"),)] == 1.0
    assert m[p + "last_night_ok"][()] == 0.0
    assert m[p + "last_night_steps"][(("kind", "patterns_added"), ("step", "distill"))] == 2.0
    assert m[p + "last_night_llm_tokens"][(("step", "distill"), ("type", "prompt"))] == 1000.0
    assert m[p + "last_night_timestamp_seconds"][()] == (T0 + timedelta(days=4)).timestamp()
    assert m[p + "last_success_timestamp_seconds"][()] == runs[3].finished_at.timestamp()  # type: ignore[union-attr]
    assert m[p + "store_size"][(("kind", "episodes_live"),)] == 50.0
    assert m[p + "store_size"][(("kind", "episodes_total"),)] == 100.0
    assert m[p + "open_contradictions"][()] == 2.0
    assert m[p + "outbox_pending"][()] == 3.0
    assert m[p + "outbox_failed"][()] == 2.0  # failed alerts do not vanish from the dashboard
    assert m[p + "memory_index_entries"][()] == 47.0
    assert m[p + "pattern_lag_seconds"][(("percentile", "50"),)] == 300.0
    assert m[p + "pattern_lag_seconds"][(("percentile", "95"),)] == pytest.approx(420.0)
    health = {dict(k)["signal"]: v for k, v in m[p + "health"].items()}
    assert health["failed_steps"] == 2.0 and health["merges"] == 0.0 and health["memory_index"] == 0.0
    assert set(m[p + "source_up"].values()) == {1.0}
    # A night in progress neither replaces the last finished night nor counts as a failure.
    running = make_run(5).model_copy(update={"finished_at": None, "id": "running"})
    running.steps[3].status = "running"
    later = scrape(collector_registry([*runs[1:], running]))
    assert later[p + "last_night_timestamp_seconds"][()] == (T0 + timedelta(days=4)).timestamp()
    assert {dict(k)["signal"]: v for k, v in later[p + "health"].items()}["failed_steps"] == 2.0
    # Families from callables not given here, and per-team ones (these runs have no team): test_metrics_teams.py.
    optional = {"backend_up", "llm_up", "outbox_oldest_pending_timestamp_seconds"} | {
        name for name in FAMILIES if name.startswith("team_")
    }
    declared = {f"{p}{name}" for name in FAMILIES if name not in optional}
    assert set(m) <= declared and len(m) >= len(declared) - 1  # only cost is absent (it is 0.0 here, so present)


def test_a_failing_source_is_reported_not_raised_and_last_night_sticks() -> None:
    runs = [make_run(0), *[make_run(1, trigger="watchdog").model_copy(update={"id": f"w{i}"}) for i in range(5)]]
    calls: list[int] = []

    def ledger(n: int) -> list[Run]:
        calls.append(n)
        if len(calls) == 1:
            return [runs[0]]  # first scrape: the night is still in the window
        return runs[1:][:n]  # later: a busy day of watchdog distills pushed it out

    def broken_outbox() -> int | None:
        raise ConnectionError("outbox store down")

    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(
        SleepCollector(
            ledger, lambda: {"episodes_total": 5}, outbox_pending=broken_outbox, index_cap=CAP, grace_days=GRACE_DAYS
        )
    )
    assert calls == []  # registering reads nothing
    with structlog.testing.capture_logs() as logs:  # captured, not printed: and it must say which source failed
        first, second = scrape(reg), scrape(reg)
    assert [(e["event"], e["source"]) for e in logs] == [("metrics_source_failed", "outbox")] * 2
    assert calls == [5, 5]  # one night_runs(5) per scrape
    for m in (first, second):
        assert m["taskzilla_sleep_source_up"][(("source", "outbox"),)] == 0.0
        assert "taskzilla_sleep_outbox_pending" not in m
        assert m["taskzilla_sleep_last_night_timestamp_seconds"][()] == T0.timestamp()
    assert "taskzilla_sleep_open_contradictions" not in second  # the size callable did not give it


def exported_names() -> set[str]:
    """Every series name a worker's /metrics can hold: the ledger gauges and its instruments (with the
    suffixes Prometheus sees: ``_total`` of a counter, ``_bucket``/``_count``/``_sum`` of a histogram)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = {f"taskzilla_sleep_{name}" for name in FAMILIES}
    for fam in Instruments().registry.collect():
        names |= {fam.name + s for s in suffixes[fam.type]}
    return names


def test_grafana_dashboard_and_prometheus_config_match_the_metric_names() -> None:
    import yaml

    ops = Path(__file__).resolve().parents[2] / "ops"
    dash = json.loads((ops / "grafana" / "taskzilla-sleep.json").read_text())
    assert dash["uid"] == "taskzilla-sleep"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert list(variables) == ["DS_PROMETHEUS", "job", "instance", "team"]
    for name in ("job", "instance", "team"):  # replicas, teams: pick one, several or all
        v = variables[name]
        assert v["type"] == "query" and v["multi"] and v["includeAll"] and v["allValue"] == ".*"
        source = "taskzilla_sleep_team_patterns_live" if name == "team" else "taskzilla_sleep_build_info"
        assert v["query"]["query"].startswith(f"label_values({source}")
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len(panels) >= 12 and all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in panels)
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    series = [m for e in exprs for m in re.findall(r"\b((?:taskzilla_sleep|process)_\w+)(\{[^}]*\})?", e)]
    unscoped = [name for name, labels in series if 'job=~"$job", instance=~"$instance"' not in labels]
    assert unscoped == [], "every query is scoped to the chosen job and instance"
    used = {name for name, _ in series}
    assert used <= exported_names(), "the dashboard queries a metric nobody exports"
    assert {"taskzilla_sleep_health", "taskzilla_sleep_last_success_timestamp_seconds"} <= used
    (alerts,) = [i for i, p in enumerate(dash["panels"]) if p["type"] == "row" and p["title"] == "Alerts"]
    after = dash["panels"][alerts + 1 :]
    row = after[: next((i for i, p in enumerate(after) if p["type"] == "row"), len(after))]
    in_row = " ".join(t["expr"] for p in row for t in p["targets"])
    for name in ("outbox_pending", "outbox_failed", "alert_deliveries_total", "alert_delivery_failures_total"):
        assert f"taskzilla_sleep_{name}" in in_row, name
    # Per team: every team_* series has a panel, each scoped to the chosen teams.
    team_exprs = [e for e in exprs if "taskzilla_sleep_team_" in e]
    assert {n for n in exported_names() if n.startswith("taskzilla_sleep_team_")} <= used
    assert team_exprs and all('team=~"$team"' in e for e in team_exprs)
    for name in ("backend_up", "llm_up", "outbox_oldest_pending_timestamp_seconds"):  # what the new rules watch
        assert f"taskzilla_sleep_{name}" in used, name

    prom = yaml.safe_load((ops / "prometheus.yml").read_text())
    (job,) = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == ["taskzilla:8765"]
    provider = yaml.safe_load((ops / "grafana" / "provisioning" / "dashboards" / "taskzilla.yml").read_text())
    assert provider["providers"][0]["type"] == "file"
    source = yaml.safe_load((ops / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert source["datasources"][0]["type"] == "prometheus" and source["datasources"][0]["isDefault"] is True


def test_the_charts_run_left_to_right_in_clock_time_whatever_order_the_runs_started(tmp_path: Path) -> None:
    """A backfill (run-once --now, a catch-up) of earlier nights started after the later ones: the
    ledger holds them by start, the charts' axis is the nights' clock, oldest on the left."""
    runs = [make_run(day, patterns=10 + day) for day in (3, 4, 5)]
    late = [
        r.model_copy(update={"started_at": T0 + timedelta(days=9, hours=i)})
        for i, r in enumerate(make_run(d) for d in (0, 1, 2))
    ]
    late = [
        r.model_copy(update={"sizes_after": {**r.sizes_after, "patterns_live": 10 + i}}) for i, r in enumerate(late)
    ]
    page = write_html(sample_report(tmp_path, [*runs, *late]), tmp_path / "r.html").read_text("utf-8")
    first = well_formed(page).find(".//{*}svg")
    assert first is not None
    dates = [
        t.text for t in first.iter("{http://www.w3.org/2000/svg}text") if t.text and re.fullmatch(r"\d\d-\d\d", t.text)
    ]
    xs = [float(t.get("x", "0")) for t in first.iter("{http://www.w3.org/2000/svg}text") if t.text in dates]
    assert dates == ["11-28", "11-29", "11-30", "12-01", "12-02", "12-03"] and xs == sorted(xs)
    # The live-patterns line climbs left to right (10 … 15): values move with their labels.
    line = [
        p for p in first.iter("{http://www.w3.org/2000/svg}circle") if "live patterns" in (p.findtext("{*}title") or "")
    ]
    values = [int((c.findtext("{*}title") or "").rsplit(": ", 1)[1]) for c in line]
    assert values == [10, 11, 12, 13, 14, 15]
