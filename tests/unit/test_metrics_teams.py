"""The per-team series of /metrics and their cardinality bound (``metrics.team_labels_max``), the
backend pings, the model verdict and the outbox's oldest pending alert, on the in-memory store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from taskzilla_sleep.core.models import Run, StepResult
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.observe.metrics import OTHER_TEAM, SleepCollector, labelled_teams, ledger_collector
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import TeamCounts

T0 = datetime(2026, 11, 28, 2, 5, tzinfo=UTC)
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def team_run(team: str, *, failed: bool = False, minutes: float = 2.0, deferred: int = 0, day: int = 0) -> Run:
    now = T0 + timedelta(days=day)
    steps = [
        StepResult.model_validate({"step": "prune", "status": "ok"}),
        StepResult.model_validate(
            {"step": "distill", "status": "failed" if failed else "ok", "counts": {"deferred_groups": deferred}}
        ),
        StepResult.model_validate({"step": "reflect", "status": "skipped" if failed else "ok"}),
        StepResult.model_validate({"step": "decay", "status": "skipped" if failed else "ok"}),
    ]
    return Run(
        id=f"run-{team}-{day}",
        trigger="schedule",
        started_at=now,
        finished_at=now + timedelta(minutes=minutes),
        now=now,
        slot=now.date().isoformat(),
        team=team,
        steps=steps,
    )


def scrape(collector: SleepCollector) -> Samples:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    out: Samples = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def collector(runs: list[Run], counts: dict[str, TeamCounts], cap: int) -> SleepCollector:
    return SleepCollector(
        lambda n: runs,
        lambda: {},
        team_counts=lambda: counts,
        team_labels_max=cap,
        index_cap=50,
        grace_days=3,
    )


def by_team(m: Samples, name: str) -> dict[str, float]:
    return {dict(k)["team"]: v for k, v in m.get("taskzilla_sleep_" + name, {}).items()}


def test_teams_beyond_the_bound_are_summed_as_other_and_the_worst_of_them_shown() -> None:
    runs = [
        team_run("alpha", minutes=3),
        team_run("beta", deferred=4, minutes=1),
        team_run("gamma", failed=True, minutes=7, deferred=2),
        team_run("other", minutes=30, deferred=1),  # a real team named "other" goes with the rest
    ]
    counts = {
        "alpha": TeamCounts(patterns_live=5, contradictions_open=1),
        "beta": TeamCounts(patterns_live=3, contradictions_open=2),
        "gamma": TeamCounts(patterns_live=2, contradictions_open=4),
        "other": TeamCounts(patterns_live=1, contradictions_open=0),
        "delta": TeamCounts(patterns_live=9, contradictions_open=0),  # no night yet
    }

    m = scrape(collector(runs, counts, cap=2))

    assert by_team(m, "team_patterns_live") == {"alpha": 5, "beta": 3, OTHER_TEAM: 2 + 1 + 9}
    assert by_team(m, "team_open_contradictions") == {"alpha": 1, "beta": 2, OTHER_TEAM: 4}
    assert by_team(m, "team_last_night_ok") == {"alpha": 1, "beta": 1, OTHER_TEAM: 0}  # gamma failed
    assert by_team(m, "team_last_night_duration_seconds") == {"alpha": 180, "beta": 60, OTHER_TEAM: 1800}
    rows = m["taskzilla_sleep_team_last_night_deferred_groups"].items()
    deferred = {(dict(k)["team"], dict(k)["step"]): v for k, v in rows}
    assert deferred[("beta", "distill")] == 4 and deferred[(OTHER_TEAM, "distill")] == 2 + 1
    assert ("gamma", "distill") not in deferred
    # However many teams, at most cap + 1 label values.
    assert len({dict(k)["team"] for fam in m.values() for k in fam if "team" in dict(k)}) == 3


def test_the_bound_holds_for_a_thousand_teams_and_zero_sums_every_team() -> None:
    counts = {f"t{i:04d}": TeamCounts(patterns_live=1, contradictions_open=1) for i in range(1000)}
    m = scrape(collector([], counts, cap=20))
    live = by_team(m, "team_patterns_live")
    assert len(live) == 21 and live[OTHER_TEAM] == 980
    assert sum(live.values()) == 1000
    assert labelled_teams(counts, 20) == sorted(counts)[:20]  # by name: stable from scrape to scrape
    assert by_team(scrape(collector([], counts, cap=0)), "team_open_contradictions") == {OTHER_TEAM: 1000}


def test_a_teams_last_night_sticks_when_watchdog_runs_push_it_out_of_the_window() -> None:
    night = [team_run("alpha", deferred=3)]
    calls: list[int] = []

    def ledger(n: int) -> list[Run]:
        calls.append(n)
        return night if len(calls) == 1 else []

    c = SleepCollector(ledger, lambda: {}, team_labels_max=5, index_cap=50, grace_days=3)
    first, second = scrape(c), scrape(c)
    assert by_team(first, "team_last_night_ok") == by_team(second, "team_last_night_ok") == {"alpha": 1}


def test_the_worker_collector_pings_the_stores_and_shows_the_model_and_the_oldest_pending_alert() -> None:
    graph = MemoryGraphStore()
    queued = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)

    def vectors_down() -> None:
        raise ConnectionError("chroma: connection refused")

    c = ledger_collector(
        graph,
        index_cap=50,
        grace_days=3,
        team_labels_max=Settings().metrics.team_labels_max,
        vectors_ping=vectors_down,
        outbox_oldest_pending=lambda: queued,
        llm_up=lambda: False,
    )
    m = scrape(c)
    p = "taskzilla_sleep_"
    assert m[p + "backend_up"] == {(("store", "graph"),): 1.0, (("store", "vectors"),): 0.0}
    assert m[p + "llm_up"][()] == 0.0
    assert m[p + "outbox_oldest_pending_timestamp_seconds"][()] == queued.timestamp()
    assert m[p + "source_up"][(("source", "team_counts"),)] == 1.0
    # Not checked yet (None): no llm_up at all rather than a made-up value.
    assert p + "llm_up" not in scrape(ledger_collector(graph, index_cap=50, grace_days=3, llm_up=lambda: None))


def test_the_default_bound_is_in_the_settings() -> None:
    assert Settings().metrics.team_labels_max == 20
