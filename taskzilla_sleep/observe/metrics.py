"""Prometheus metrics for ops: the figures of `taskzilla-sleep report`, read from the ledger on scrape.

A custom collector on a dedicated ``CollectorRegistry`` (never the process-global one, so tests and
several workers in one process do not collide). It reads nothing until scraped, and then only
``night_runs(window)`` (the runs of the last ``window`` nights, a scheduled night's team jobs merged
into one) and one store-size call: a scrape stays cheap however large the stores are. The worker
decides what to expose by the callables it passes in.

Health verdicts are exported as ``taskzilla_sleep_health{signal}``: 0 ok, 1 watch, 2 bad, -1 unknown.
The pinned-facts signal is not among them: it reads every pattern, which a scrape must not do; the
report (and its exit code) covers it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from taskzilla_sleep.core.models import Run, StepName
from taskzilla_sleep.observe.report.nights import Night, ledger_nights, percentile
from taskzilla_sleep.observe.report.signals import (
    HEALTH_RANK,
    contradictions_signal,
    failed_steps_signal,
    memory_index_signal,
    merges_signal,
    store_growth_signal,
)
from taskzilla_sleep.stores.ports import GraphCounts, TeamCounts

log = structlog.get_logger(__name__)
T = TypeVar("T")

PREFIX = "taskzilla_sleep"
NIGHT_TRIGGERS = frozenset({"schedule", "catch-up", "manual", "demo"})  # a watchdog distill is not a night

# name -> (help, label names). describe() and collect() both come from this table, so the names a
# dashboard relies on are declared in one place.
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "source_up": (
        "1 if the source could be read on this scrape (ledger, store_sizes, outbox, outbox_failed, outbox_oldest, "
        "memory_index, team_counts)",
        ("source",),
    ),
    "collect_seconds": ("Time this scrape spent reading the ledger and the store sizes", ()),
    "last_night_timestamp_seconds": ("The clock the last night ran for (its --now), as a Unix time", ()),
    "last_night_ok": ("1 if the last night finished with no failed step", ()),
    "last_night_duration_seconds": ("Wall time of the last night, all steps", ()),
    "last_night_step_duration_seconds": ("Wall time of each step of the last night", ("step",)),
    "last_night_step_failed": ("1 if the step failed in the last night", ("step",)),
    "last_night_steps": (
        "What each step of the last night did (patterns_added, merges, retired...)",
        ("step", "kind"),
    ),
    "last_night_llm_calls": ("LLM calls made by each step of the last night", ("step",)),
    "last_night_llm_tokens": ("LLM tokens used by each step of the last night", ("step", "type")),
    "last_night_llm_cost_usd": ("LLM cost of each step of the last night (absent when unknown)", ("step",)),
    "last_success_timestamp_seconds": ("When the last successful night finished, as a Unix time", ()),
    "store_size": ("Current store sizes (episodes_total, episodes_live, patterns_live, ...)", ("kind",)),
    "open_contradictions": ("Contradictions waiting for a person", ()),
    "outbox_pending": ("Chat alerts waiting in the durable outbox", ()),
    "outbox_failed": ("Chat alerts given up after max_attempts: kept, never sent until requeued", ()),
    "memory_index_entries": ("Entries in the memory index the bot loads", ()),
    "pattern_lag_seconds": (
        "Pattern availability lag over the patterns created in the recent runs, by percentile (50, 95)",
        ("percentile",),
    ),
    "health": ("Health verdict per signal: 0 ok, 1 watch, 2 bad, -1 unknown", ("signal",)),
    "backend_up": ("1 if the store answered a ping on this scrape (graph, vectors)", ("store",)),
    "llm_up": (
        "1 if the last model check passed (or no model is configured: the offline provider), 0 if not",
        (),
    ),
    "outbox_oldest_pending_timestamp_seconds": (
        "When the oldest chat alert still pending was queued, as a Unix time (absent: none pending)",
        (),
    ),
    "team_open_contradictions": (
        "Contradictions waiting for a person, per team (metrics.team_labels_max teams; the rest: team=other)",
        ("team",),
    ),
    "team_patterns_live": ("Live patterns (tentative, active, contested) per team", ("team",)),
    "team_last_night_ok": ("1 if the team's last night finished with no failed step (other: every team's)", ("team",)),
    "team_last_night_timestamp_seconds": (
        "The clock the team's last night ran for, as a Unix time (other: the oldest)",
        ("team",),
    ),
    "team_last_night_duration_seconds": ("Wall time of the team's last night (other: the longest)", ("team",)),
    "team_last_night_deferred_groups": (
        "Groups (distill) and comparisons (reflect) the team's last night left for the next one (budget or window)",
        ("team", "step"),
    ),
}
OTHER_TEAM = "other"  # the label value of every team beyond metrics.team_labels_max
DEFERRING_STEPS: tuple[StepName, ...] = ("distill", "reflect")


class LedgerSource(Protocol):
    """What build_registry needs from the graph store (GraphStore has them all)."""

    def night_runs(self, n: int) -> list[Run]: ...

    def counts(self) -> GraphCounts: ...

    def team_counts(self) -> dict[str, TeamCounts]: ...

    def ping(self) -> None: ...


class SleepCollector:
    """Reads the ledger and the store sizes on each scrape and yields gauges.

    ``runs(n)``: the runs of the newest ``n`` nights (``graph.night_runs``); a scheduled night's team
    jobs are merged into one night (``report.nights.ledger_nights``). ``sizes()``: current store sizes by kind.
    ``outbox_pending()`` / ``outbox_failed()`` / ``memory_index_size()``: optional; None (or returning None) leaves the
    gauge out rather than reporting a made-up 0. ``index_cap`` and ``grace_days``: the worker's
    ``memory_index.max_entries`` and ``decay.grace_hours`` / 24, which the health rules judge against.
    """

    def __init__(
        self,
        runs: Callable[[int], Sequence[Run]],
        sizes: Callable[[], Mapping[str, int]],
        *,
        outbox_pending: Callable[[], int | None] | None = None,
        outbox_failed: Callable[[], int | None] | None = None,
        memory_index_size: Callable[[], int | None] | None = None,
        window: int = 5,
        index_cap: int,
        grace_days: float,
        team_counts: Callable[[], Mapping[str, TeamCounts]] | None = None,
        team_labels_max: int = 20,
        backends: Mapping[str, Callable[[], object]] | None = None,
        outbox_oldest_pending: Callable[[], datetime | None] | None = None,
        llm_up: Callable[[], bool | None] | None = None,
    ) -> None:
        self._team_counts = team_counts
        self._team_cap = team_labels_max
        self._backends = dict(backends or {})
        self._outbox_oldest = outbox_oldest_pending
        self._llm_up = llm_up
        self._runs = runs
        self._sizes = sizes
        self._outbox = outbox_pending
        self._outbox_failed = outbox_failed
        self._index = memory_index_size
        self._window = window
        self._index_cap = index_cap
        self._grace_days = grace_days
        # A day of watchdog distills can push the last night out of the window: remember it so the
        # "last night" gauges and the last-success time do not vanish until the next night.
        self._lock = threading.Lock()
        self._last_night: Night | None = None
        self._last_success: datetime | None = None
        self._team_nights: dict[str, Night] = {}  # each team's last night (its own team jobs)

    def describe(self) -> Iterable[Metric]:
        # Names only: registering the collector must not touch the stores.
        return [_family(name) for name in FAMILIES]

    def collect(self) -> Iterable[Metric]:
        t0 = time.perf_counter()
        fam = {name: _family(name) for name in FAMILIES}
        runs = self._read("ledger", fam, lambda: list(self._runs(self._window)))
        nights = ledger_nights(runs, self._window) if runs is not None else None
        sizes = self._read("store_sizes", fam, lambda: dict(self._sizes()))
        entries = self._read("memory_index", fam, self._index) if self._index is not None else None
        if runs is not None and nights is not None:
            self._remember(nights)
            self._remember_teams(runs)
            _add_window(fam, nights, sizes, entries, self._index_cap, self._grace_days)
        for store, ping in sorted(self._backends.items()):
            fam["backend_up"].add_metric([store], 1 if _answers(store, ping) else 0)
        read_teams = self._team_counts
        teams = self._read("team_counts", fam, lambda: dict(read_teams())) if read_teams is not None else None
        with self._lock:
            team_nights = dict(self._team_nights)
        _add_teams(fam, teams, team_nights, self._team_cap)
        if sizes is not None:
            for kind, v in sorted(sizes.items()):
                fam["store_size"].add_metric([kind], v)
            if "contradictions_open" in sizes:
                fam["open_contradictions"].add_metric([], sizes["contradictions_open"])
        with self._lock:
            last, success = self._last_night, self._last_success
        if last is not None:
            _add_last_night(fam, last)
        if success is not None:
            fam["last_success_timestamp_seconds"].add_metric([], success.timestamp())
        if self._outbox is not None:
            pending = self._read("outbox", fam, self._outbox)
            if pending is not None:
                fam["outbox_pending"].add_metric([], pending)
        if self._outbox_failed is not None:
            failed = self._read("outbox_failed", fam, self._outbox_failed)
            if failed is not None:
                fam["outbox_failed"].add_metric([], failed)
        if self._outbox_oldest is not None:
            oldest = self._read("outbox_oldest", fam, self._outbox_oldest)
            if oldest is not None:
                fam["outbox_oldest_pending_timestamp_seconds"].add_metric([], oldest.timestamp())
        if self._llm_up is not None:
            up = self._llm_up()
            if up is not None:
                fam["llm_up"].add_metric([], 1 if up else 0)
        if entries is not None:
            fam["memory_index_entries"].add_metric([], entries)
        fam["collect_seconds"].add_metric([], time.perf_counter() - t0)
        return list(fam.values())

    def _read(self, source: str, fam: dict[str, GaugeMetricFamily], read: Callable[[], T]) -> T | None:
        """One source; a failing store shows as source_up 0, not as a failed scrape (HTTP 500)."""
        try:
            value = read()
        except Exception as exc:  # any store or callable failure: the other gauges are still worth serving
            log.warning("metrics_source_failed", source=source, error=f"{type(exc).__name__}: {exc}"[:300])
            fam["source_up"].add_metric([source], 0)
            return None
        fam["source_up"].add_metric([source], 1)
        return value

    def _remember(self, nights: Sequence[Night]) -> None:
        # A night still running (or abandoned mid-way) is not "the last night" yet: its half-filled
        # figures would read as a failure on every scrape until it ends. A stale last-success time
        # is what shows a night that never finished.
        real = [x for x in nights if x.trigger in NIGHT_TRIGGERS and x.status != "incomplete"]
        ok = [x.finished_at for x in real if x.status == "ok" and x.finished_at is not None]
        with self._lock:
            if real and (self._last_night is None or real[-1].started_at >= self._last_night.started_at):
                self._last_night = real[-1]
            if ok and (self._last_success is None or max(ok) > self._last_success):
                self._last_success = max(ok)

    def _remember_teams(self, runs: Sequence[Run]) -> None:
        """Each team's last night, from its own team jobs (a night's runs of one team merged, as
        ``_remember`` does for the whole night); remembered as the night itself is."""
        by_team: dict[str, list[Run]] = {}
        for r in runs:
            if r.team is not None and r.trigger in NIGHT_TRIGGERS:
                by_team.setdefault(r.team, []).append(r)
        with self._lock:
            for team, mine in by_team.items():
                real = [x for x in ledger_nights(mine) if x.status != "incomplete"]
                known = self._team_nights.get(team)
                if real and (known is None or real[-1].started_at >= known.started_at):
                    self._team_nights[team] = real[-1]


def _answers(store: str, ping: Callable[[], object]) -> bool:
    try:
        ping()
    except Exception as exc:  # a store that does not answer is the figure itself, not a failed scrape
        log.warning("metrics_backend_down", store=store, error=f"{type(exc).__name__}: {exc}"[:300])
        return False
    return True


def labelled_teams(teams: Iterable[str], cap: int) -> list[str]:
    """The teams with a ``team`` label of their own: the first ``cap`` by name. A team named "other"
    never is one (its figures go with the other teams'): the label value stays unambiguous."""
    return sorted(t for t in set(teams) if t != OTHER_TEAM)[: max(0, cap)]


def _add_teams(
    fam: dict[str, GaugeMetricFamily],
    counts: Mapping[str, TeamCounts] | None,
    nights: Mapping[str, Night],
    cap: int,
) -> None:
    """The per-team series: ``cap`` teams by name, the rest summed (counts, deferrals), the worst of
    them (ok, the oldest night, the longest) as team="other". Bounded by ``cap`` + 1 label values."""
    mine = set(labelled_teams([*(counts or {}), *nights], cap))

    def label(team: str) -> str:
        return team if team in mine else OTHER_TEAM

    if counts is not None:
        live: dict[str, int] = {}
        opened: dict[str, int] = {}
        for team, c in counts.items():
            live[label(team)] = live.get(label(team), 0) + c.patterns_live
            opened[label(team)] = opened.get(label(team), 0) + c.contradictions_open
        for team in sorted(live):
            fam["team_patterns_live"].add_metric([team], live[team])
            fam["team_open_contradictions"].add_metric([team], opened[team])
    grouped: dict[str, list[Night]] = {}
    for team, night in nights.items():
        grouped.setdefault(label(team), []).append(night)
    for team, group in sorted(grouped.items()):
        fam["team_last_night_ok"].add_metric([team], 1 if all(x.status == "ok" for x in group) else 0)
        fam["team_last_night_timestamp_seconds"].add_metric([team], min(x.now for x in group).timestamp())
        durations = [x.duration_s for x in group if x.duration_s is not None]
        if durations:
            fam["team_last_night_duration_seconds"].add_metric([team], max(durations))
        for step in DEFERRING_STEPS:
            ran = [s for x in group for s in x.steps if s.step == step]
            if ran:
                deferred = sum(s.counts.get("deferred_groups", 0) for s in ran)
                fam["team_last_night_deferred_groups"].add_metric([team, step], deferred)


def _add_window(
    fam: dict[str, GaugeMetricFamily],
    nights: list[Night],
    sizes: Mapping[str, int] | None,
    entries: int | None,
    index_cap: int,
    grace_days: float,
) -> None:
    """Figures over the nights read on this scrape: pattern lag quantiles and the health verdicts."""
    lags = [lag for x in nights for lag in x.lags_s]
    for q in (50, 95):
        v = percentile(lags, q)
        if v is not None:
            fam["pattern_lag_seconds"].add_metric([str(q)], v)
    signals = [
        store_growth_signal(nights, grace_days),
        merges_signal(nights),
        failed_steps_signal([x for x in nights if x.status != "incomplete"]),
        memory_index_signal([entries] if entries is not None else None, index_cap),
    ]
    open_now = sizes.get("contradictions_open") if sizes is not None else None
    if open_now is not None:
        # The age of the oldest contradiction would need another query; the count trend is enough here.
        as_of = nights[-1].now if nights else datetime.now(UTC)
        signals.append(contradictions_signal(nights, open_now, None, as_of))
    for s in signals:
        fam["health"].add_metric([s.name], HEALTH_RANK[s.verdict])


def _add_last_night(fam: dict[str, GaugeMetricFamily], x: Night) -> None:
    fam["last_night_timestamp_seconds"].add_metric([], x.now.timestamp())
    fam["last_night_ok"].add_metric([], 1 if x.status == "ok" else 0)
    if x.duration_s is not None:
        fam["last_night_duration_seconds"].add_metric([], x.duration_s)
    for s in x.steps:
        if s.duration_s is not None:
            fam["last_night_step_duration_seconds"].add_metric([s.step], s.duration_s)
        fam["last_night_step_failed"].add_metric([s.step], 1 if s.status == "failed" else 0)
        for kind, v in sorted(s.counts.items()):
            fam["last_night_steps"].add_metric([s.step, kind], v)
        fam["last_night_llm_calls"].add_metric([s.step], s.llm_calls)
        fam["last_night_llm_tokens"].add_metric([s.step, "prompt"], s.prompt_tokens)
        fam["last_night_llm_tokens"].add_metric([s.step, "completion"], s.completion_tokens)
        if s.cost_usd is not None:
            fam["last_night_llm_cost_usd"].add_metric([s.step], s.cost_usd)


def _family(name: str) -> GaugeMetricFamily:
    doc, labels = FAMILIES[name]
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))


def build_registry(
    graph: LedgerSource,
    *,
    outbox_pending: Callable[[], int | None] | None = None,
    outbox_failed: Callable[[], int | None] | None = None,
    memory_index_size: Callable[[], int | None] | None = None,
    window: int = 5,
    index_cap: int,
    grace_days: float,
    team_labels_max: int = 20,
) -> CollectorRegistry:
    """A fresh registry with one ledger_collector over ``graph`` (one night_runs(window), one counts()
    and one team_counts() a scrape)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        ledger_collector(
            graph,
            outbox_pending=outbox_pending,
            outbox_failed=outbox_failed,
            memory_index_size=memory_index_size,
            window=window,
            index_cap=index_cap,
            grace_days=grace_days,
            team_labels_max=team_labels_max,
        )
    )
    return registry


def ledger_collector(
    graph: LedgerSource,
    *,
    outbox_pending: Callable[[], int | None] | None = None,
    outbox_failed: Callable[[], int | None] | None = None,
    memory_index_size: Callable[[], int | None] | None = None,
    window: int = 5,
    index_cap: int,
    grace_days: float,
    team_labels_max: int = 20,
    vectors_ping: Callable[[], object] | None = None,
    outbox_oldest_pending: Callable[[], datetime | None] | None = None,
    llm_up: Callable[[], bool | None] | None = None,
) -> SleepCollector:
    """The SleepCollector over ``graph``; the worker attaches it to its ``Instruments`` (one /metrics).

    ``index_cap`` and ``grace_days``: ``memory_index.max_entries`` and ``decay.grace_hours`` / 24 of
    the worker's settings (see SleepCollector); ``team_labels_max``: ``metrics.team_labels_max``.
    ``vectors_ping``: the vector store's ping (``backend_up{store="vectors"}``; the graph's is always
    there); ``llm_up``: the worker's cached model check (never a call of its own).
    """
    backends: dict[str, Callable[[], object]] = {"graph": graph.ping}
    if vectors_ping is not None:
        backends["vectors"] = vectors_ping
    return SleepCollector(
        graph.night_runs,
        lambda: graph.counts().sizes(),
        outbox_pending=outbox_pending,
        outbox_failed=outbox_failed,
        memory_index_size=memory_index_size,
        window=window,
        index_cap=index_cap,
        grace_days=grace_days,
        team_counts=graph.team_counts,
        team_labels_max=team_labels_max,
        backends=backends,
        outbox_oldest_pending=outbox_oldest_pending,
        llm_up=llm_up,
    )


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """(body, content type) for a /metrics response."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


__all__ = [
    "FAMILIES",
    "OTHER_TEAM",
    "LedgerSource",
    "SleepCollector",
    "build_registry",
    "labelled_teams",
    "ledger_collector",
    "render",
]
