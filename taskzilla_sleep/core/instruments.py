"""The worker's own counters and histograms: what happens in this process (ingests, recalls, HTTP
requests, alert deliveries, LLM calls, steps), beside the ledger gauges of ``metrics``.

One :class:`Instruments` per ``app.Services`` (built with it, passed to whoever counts), each on its
own ``CollectorRegistry``: two workers in one process (or two tests) never share a count. The
worker serves that registry at ``/metrics``, with the ledger collector, the process metrics and
``taskzilla_sleep_build_info`` registered in it.

Label values are bounded: a route *template* (never a raw path), a step, a prompt kind, a rule or
channel from the config. Every name here passes ``promtool check metrics``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.registry import Collector

from taskzilla_sleep import __version__

PREFIX = "taskzilla_sleep"
# Seconds. A recall answers in milliseconds; an HTTP ingest of a large batch takes seconds.
FAST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A step takes from a second to an hour (a busy team's distill through a hosted model).
STEP_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
# Third supporting episode -> recallable: the watchdog aims at ~35 min, a night at hours.
LAG_BUCKETS = (60.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2100.0, 2700.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0)
LLM_KINDS = ("distill", "reflect")  # the prompts (llm.prompts.shared.Prompt.name)
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
AUTH_SURFACES = ("api", "mcp", "console")  # where a token is presented


class ChannelCounts(Protocol):
    """One channel's round of deliveries (``alerts.delivery.ChannelReport``)."""

    delivered: int
    retried: int
    failed: int


class Instruments:
    """Counters and histograms on one registry; see the module docstring.

    ``process``: also register ``process_*`` and ``python_info`` (the worker does; a short-lived
    command has no use for them, and a unit test may leave them out).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._attached: Collector | None = None
        r = self.registry
        if process:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
        build = Gauge(f"{PREFIX}_build_info", "Always 1: the taskzilla-sleep version running", ["version"], registry=r)
        build.labels(__version__).set(1)

        self.episodes_ingested = Counter(
            f"{PREFIX}_episodes_ingested", "Episodes stored by an ingest (new ones; a re-sent one is not)", registry=r
        )
        self.episodes_skipped = Counter(
            f"{PREFIX}_episodes_skipped",
            "Episodes not stored by write discipline, by the connector rule that matched (ingest.write_discipline)",
            ["rule"],
            registry=r,
        )
        self.recall_duration = Histogram(
            f"{PREFIX}_recall_duration_seconds",
            "Time a recall took (HTTP API or MCP), from the query to the ranked items",
            buckets=FAST_BUCKETS,
            registry=r,
        )
        self.http_requests = Counter(
            f"{PREFIX}_http_requests",
            "HTTP requests answered, by method, route template and status code",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_duration = Histogram(
            f"{PREFIX}_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template",
            ["method", "route"],
            buckets=FAST_BUCKETS,
            registry=r,
        )
        self.alert_deliveries = Counter(
            f"{PREFIX}_alert_deliveries",
            "Chat alerts delivered, by channel and channel kind",
            ["channel", "channel_kind"],
            registry=r,
        )
        self.alert_failures = Counter(
            f"{PREFIX}_alert_delivery_failures",
            "Failed chat alert attempts, by channel, kind and outcome (retry: tried again later; gave_up: failed)",
            ["channel", "channel_kind", "outcome"],
            registry=r,
        )
        self.llm_calls = Counter(
            f"{PREFIX}_llm_calls", "LLM completions answered, by prompt kind (distill, reflect)", ["kind"], registry=r
        )
        self.llm_call_duration = Histogram(
            f"{PREFIX}_llm_call_duration_seconds",
            "Time an answered LLM completion took, by prompt kind",
            ["kind"],
            buckets=LLM_BUCKETS,
            registry=r,
        )
        self.llm_errors = Counter(
            f"{PREFIX}_llm_errors",
            "LLM failures by prompt kind and error (transport: a failed request attempt; "
            "invalid_answer: an answer that was not usable)",
            ["kind", "error"],
            registry=r,
        )
        self.llm_tokens = Counter(
            f"{PREFIX}_llm_tokens",
            "LLM tokens used, by prompt kind and type (prompt, completion)",
            ["kind", "type"],
            registry=r,
        )
        self.llm_requests = Counter(
            f"{PREFIX}_llm_requests",
            "Requests asked of the LLM (a group to distill, a pair to compare), by kind and outcome "
            "(answered, skipped: no usable answer after the corrective retry)",
            ["kind", "outcome"],
            registry=r,
        )
        self.step_duration = Histogram(
            f"{PREFIX}_step_duration_seconds",
            "Wall time of each step a night or watchdog run of this process ran, by step and status",
            ["step", "status"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.pattern_lag = Histogram(
            f"{PREFIX}_pattern_availability_lag_seconds",
            "Third supporting episode ingested -> pattern recallable, by the trigger that created it (watchdog, night)",
            ["trigger"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.drift_items = Counter(
            f"{PREFIX}_drift_items",
            "Items out of step between the graph and the vectors (missing or orphan vectors), found and "
            "repaired by the reconcile before a night",
            registry=r,
        )

        self.deferred_groups = Counter(
            f"{PREFIX}_deferred_groups",
            "Groups a night's distill (comparisons its reflect) left for the next night: the LLM budget "
            "(budget: calls, budget: tokens) or the window's end (window) ran out",
            ["step", "reason"],
            registry=r,
        )

        self.auth_failures = Counter(
            f"{PREFIX}_auth_failures",
            "Wrong credentials: a bearer token matching no token (api, mcp) or a failed console login, by surface",
            ["surface"],
            registry=r,
        )
        self.auth_throttled = Counter(
            f"{PREFIX}_auth_throttled",
            "Requests answered 429 because their client failed to authenticate too often, by surface",
            ["surface"],
            registry=r,
        )

        # The series the alert rules divide or take increases of exist from the start at 0: a series
        # born at its first event would lose that event to rate() and increase().
        for kind in LLM_KINDS:
            self.llm_calls.labels(kind)
            for outcome in ("answered", "skipped"):
                self.llm_requests.labels(kind, outcome)
            for error in ("transport", "invalid_answer"):
                self.llm_errors.labels(kind, error)
        for trigger in ("watchdog", "night"):
            self.pattern_lag.labels(trigger)
        for surface in AUTH_SURFACES:
            self.auth_failures.labels(surface)
            self.auth_throttled.labels(surface)

    def attach(self, collector: Collector) -> CollectorRegistry:
        """Serve ``collector`` (the ledger gauges) from this registry, in place of one attached before
        (a second worker on the same Services): the registry, for /metrics."""
        with self._lock:
            if self._attached is not None:
                self.registry.unregister(self._attached)
            self.registry.register(collector)
            self._attached = collector
        return self.registry

    # -- what the callers report -------------------------------------------------------------------
    def ingested(self, new: int, skipped_by_rule: Mapping[str, int]) -> None:
        self.episodes_ingested.inc(new)
        for rule, n in skipped_by_rule.items():
            self.episodes_skipped.labels(rule).inc(n)

    def llm_answered(self, kind: str, prompt_tokens: int, completion_tokens: int, duration_s: float) -> None:
        self.llm_calls.labels(kind).inc()
        self.llm_call_duration.labels(kind).observe(duration_s)
        self.llm_tokens.labels(kind, "prompt").inc(prompt_tokens)
        self.llm_tokens.labels(kind, "completion").inc(completion_tokens)

    def alert_round(self, by_channel: Mapping[str, ChannelCounts], kinds: Mapping[str, str]) -> None:
        """One delivery round; ``kinds``: channel name -> its kind (slack, telegram, webhook)."""
        for name, rep in by_channel.items():
            kind = kinds.get(name, "unknown")
            if rep.delivered:
                self.alert_deliveries.labels(name, kind).inc(rep.delivered)
            if rep.retried:
                self.alert_failures.labels(name, kind, "retry").inc(rep.retried)
            if rep.failed:
                self.alert_failures.labels(name, kind, "gave_up").inc(rep.failed)

    def pattern_lags(self, trigger: str, lags_s: Iterable[float]) -> None:
        label = "watchdog" if trigger == "watchdog" else "night"
        for lag in lags_s:
            self.pattern_lag.labels(label).observe(lag)


__all__ = ["ChannelCounts", "Instruments"]
