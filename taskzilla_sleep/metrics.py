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

from taskzilla_sleep.models import Run
from taskzilla_sleep.report.nights import Night, ledger_nights, percentile
from taskzilla_sleep.report.signals import (
    HEALTH_RANK,
    contradictions_signal,
    failed_steps_signal,
    memory_index_signal,
    merges_signal,
    store_growth_signal,
)
from taskzilla_sleep.stores.ports import GraphCounts

log = structlog.get_logger(__name__)
T = TypeVar("T")

PREFIX = "taskzilla_sleep"
NIGHT_TRIGGERS = frozenset({"schedule", "catch-up", "manual", "demo"})  # a watchdog distill is not a night

# name -> (help, label names). describe() and collect() both come from this table, so the names a
# dashboard relies on are declared in one place.
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "source_up": (
        "1 if the source could be read on this scrape (ledger, store_sizes, outbox, outbox_failed, memory_index)",
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
}


class LedgerSource(Protocol):
    """What build_registry needs from the graph store (GraphStore has both)."""

    def night_runs(self, n: int) -> list[Run]: ...

    def counts(self) -> GraphCounts: ...


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
    ) -> None:
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

    def describe(self) -> Iterable[Metric]:
        # Names only: registering the collector must not touch the stores.
        return [_family(name) for name in FAMILIES]

    def collect(self) -> Iterable[Metric]:
        t0 = time.perf_counter()
        fam = {name: _family(name) for name in FAMILIES}
        nights = self._read("ledger", fam, lambda: ledger_nights(self._runs(self._window), self._window))
        sizes = self._read("store_sizes", fam, lambda: dict(self._sizes()))
        entries = self._read("memory_index", fam, self._index) if self._index is not None else None
        if nights is not None:
            self._remember(nights)
            _add_window(fam, nights, sizes, entries, self._index_cap, self._grace_days)
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
) -> CollectorRegistry:
    """A fresh registry with one ledger_collector over ``graph`` (one night_runs(window) + one counts() a scrape)."""
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
) -> SleepCollector:
    """The SleepCollector over ``graph``; the worker attaches it to its ``Instruments`` (one /metrics).

    ``index_cap`` and ``grace_days``: ``memory_index.max_entries`` and ``decay.grace_hours`` / 24 of
    the worker's settings (see SleepCollector).
    """
    return SleepCollector(
        graph.night_runs,
        lambda: graph.counts().sizes(),
        outbox_pending=outbox_pending,
        outbox_failed=outbox_failed,
        memory_index_size=memory_index_size,
        window=window,
        index_cap=index_cap,
        grace_days=grace_days,
    )


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """(body, content type) for a /metrics response."""
    return generate_latest(registry), CONTENT_TYPE_LATEST


__all__ = ["FAMILIES", "LedgerSource", "SleepCollector", "build_registry", "ledger_collector", "render"]
