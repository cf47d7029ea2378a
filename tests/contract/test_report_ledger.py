"""The ops report and the Prometheus metrics over a real ledger: an embedded FalkorDB holding the runs.

The pure rules and views on hand-built runs are in tests/unit/test_report.py (no store there); this
file is what needs a store: the report command and the metrics registry reading ``runs``,
``patterns``, ``contradictions`` and ``counts`` back from the graph.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from taskzilla_sleep.core.settings import ScheduleSettings, Secrets, Settings
from taskzilla_sleep.interfaces.cli import cmd_report
from taskzilla_sleep.observe.metrics import build_registry
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.falkordb import open_falkordb
from tests.conftest import service_unavailable
from tests.unit.test_report import CAP, GRACE_DAYS, fact, make_run, scrape, well_formed

ReportCommand = Callable[[int, bool, Path], tuple[str, int]]  # (--runs, --json, --html) -> (stdout, exit code)


@pytest.fixture
def falkor(tmp_path: Path) -> Iterator[CypherGraphStore]:
    try:
        g = open_falkordb(tmp_path / "f")
    except Exception as exc:  # the embedded server ships in a wheel; if it cannot start, say why
        service_unavailable(f"embedded FalkorDB could not start: {exc}")
    try:
        g.ensure_schema()
        yield g
    finally:
        g.close()


@pytest.fixture
def report_command(
    falkor: CypherGraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> ReportCommand:
    """`taskzilla-sleep report` (cli.cmd_report) over this test's store: (what it prints, exit code).

    ``app.build`` is replaced by one that hands over the running store (and leaves it open), so the
    command's own building, HTML writing, text/JSON choice and exit code are what is tested.
    """

    @contextlib.contextmanager
    def build(settings: Settings, secrets: Secrets | None = None) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace(graph=falkor)

    monkeypatch.setattr("taskzilla_sleep.app.build", build)
    settings = Settings(data_dir=tmp_path / "data", schedule=ScheduleSettings(timezone="UTC"))

    def run(n: int, as_json: bool, html: Path) -> tuple[str, int]:
        code = cmd_report(argparse.Namespace(runs=n, json=as_json, html=html), settings, Secrets())
        return capsys.readouterr().out.removesuffix("\n"), code

    return run


def test_report_over_a_real_ledger_skips_dry_runs_and_exits_1_on_bad(
    falkor: CypherGraphStore, report_command: ReportCommand, tmp_path: Path
) -> None:
    g = falkor
    for r in [make_run(d, merges=3 - d, total=100 + 10 * d, lags=[30.0 * (d + 1)]) for d in range(4)]:
        g.save_run(r)
    g.save_run(make_run(5, dry_run=True))  # the pipeline never saves these; the report must ignore them anyway
    g.write_pattern(fact(), [], [])

    text, code = report_command(10, False, tmp_path / "report.html")
    assert code == 0, text
    assert "taskzilla-sleep report: 4 runs (2026-11-28 … 2026-12-01), times in UTC" in text
    assert "pinned facts touched = 0" in text and "all 1 pinned facts intact" in text
    assert f"charts: {tmp_path / 'report.html'}" in text
    well_formed((tmp_path / "report.html").read_text(encoding="utf-8"))

    data_text, code = report_command(2, True, tmp_path / "r2.html")
    data = json.loads(data_text)
    assert code == 0 and [n["run_id"] for n in data["nights"]] == ["run_02_schedule", "run_03_schedule"]
    assert data["nights"][1]["lags_s"] == [120.0] and data["lag_p50_s"] == 105.0

    # A pinned fact whose confidence moved is "bad": the report says so and exits 1.
    g.write_pattern(fact().model_copy(update={"confidence": 0.8}), [], [])
    text, code = report_command(10, False, tmp_path / "report.html")
    assert code == 1 and re.search(
        r"\[bad +\] pinned facts touched = 0 +1 of 1 touched: fact_\w+: confidence 0.80", text
    )


def test_build_registry_over_a_real_ledger(falkor: CypherGraphStore) -> None:
    falkor.save_run(make_run(0, merges=2))
    m = scrape(build_registry(falkor, outbox_pending=lambda: None, index_cap=CAP, grace_days=GRACE_DAYS))
    assert m["taskzilla_sleep_last_night_steps"][(("kind", "merges"), ("step", "reflect"))] == 2.0
    assert m["taskzilla_sleep_store_size"][(("kind", "episodes_total"),)] == 0.0
    assert "taskzilla_sleep_outbox_pending" not in m  # None means "not known", not 0
    assert m["taskzilla_sleep_source_up"][(("source", "ledger"),)] == 1.0


def test_a_night_of_team_jobs_is_one_night_in_the_report_and_the_metrics(
    falkor: CypherGraphStore, report_command: ReportCommand, tmp_path: Path
) -> None:
    from tests.unit.test_report_team_nights import team_night

    for r in [*team_night(0), *team_night(1, merges=(0, 1, 1))]:  # 2 nights, 3 teams x 4 steps, 24 runs
        falkor.save_run(r)
    data_text, code = report_command(5, True, tmp_path / "r.html")
    data = json.loads(data_text)
    assert code == 0, data_text
    assert [(n["run_id"], n["status"], n["merges"]) for n in data["nights"]] == [
        ("night_2026-11-28", "ok", 6),
        ("night_2026-11-29", "ok", 2),
    ]
    assert data["memory_index_sizes"] == [30, 30]
    m = scrape(build_registry(falkor, outbox_pending=lambda: None, index_cap=CAP, grace_days=GRACE_DAYS, window=1))
    assert m["taskzilla_sleep_last_night_steps"][(("kind", "merges"), ("step", "reflect"))] == 2.0
    assert m["taskzilla_sleep_last_night_llm_calls"][(("step", "distill"),)] == 6.0
