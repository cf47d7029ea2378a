"""The report's data: the run ledger flattened into nights, and a report over a window of them.

Everything here reads the ledger the pipeline writes (``graph.night_runs(n)``: whole nights) plus a few current facts
(pinned facts, open contradictions); nothing is written to the stores and nothing is rendered, so
the metrics scrape can build nights without loading the text or HTML views.

``Signal`` (one health rule's verdict) is defined with the rules in ``signals`` and used here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from taskzilla_sleep.core.errors import UsageError
from taskzilla_sleep.core.models import (
    Contradiction,
    Pattern,
    Run,
    Time,
)
from taskzilla_sleep.observe.report.nights import Night, ledger_nights, percentile
from taskzilla_sleep.observe.report.signals import (
    HEALTH_RANK,
    Health,
    Signal,
    contradictions_signal,
    failed_steps_signal,
    memory_index_signal,
    merges_signal,
    pinned_facts_signal,
    store_growth_signal,
)


class LedgerReader(Protocol):
    """What the report reads; CypherGraphStore (Neo4j and FalkorDB) has all of it."""

    def night_runs(self, n: int) -> list[Run]: ...

    def teams(self) -> list[str]: ...

    def patterns(self, team: str) -> list[Pattern]: ...

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]: ...


class TeamsLedger:
    """The ledger as a reader of some teams sees it (a one-team admin's report): the nights of those
    teams' jobs, their beliefs and contradictions; a run over several teams is nobody's own."""

    def __init__(self, graph: LedgerReader, teams: Collection[str]) -> None:
        self._graph = graph
        self._teams = frozenset(teams)

    def night_runs(self, n: int) -> list[Run]:
        return [r for r in self._graph.night_runs(n) if r.team is not None and r.team in self._teams]

    def teams(self) -> list[str]:
        return [t for t in self._graph.teams() if t in self._teams]

    def patterns(self, team: str) -> list[Pattern]:
        return self._graph.patterns(team) if team in self._teams else []

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        wanted = sorted(self._teams) if team is None else [team] if team in self._teams else []
        return [c for t in wanted for c in self._graph.contradictions(t, status)]


class Report(BaseModel):
    """What `taskzilla-sleep report` shows; its JSON (``model_dump``) is the ``--json`` output."""

    generated_at: Time
    runs_requested: int
    timezone: str = "UTC"
    nights: list[Night] = Field(default_factory=list)  # oldest first
    signals: list[Signal] = Field(default_factory=list)
    memory_index_sizes: list[int] | None = None
    open_contradictions: int = 0
    open_updates: int = 0  # ... of which changes to confirm (the rest: people disagree)
    pinned_facts: int = 0
    given_up: dict[str, int] = Field(default_factory=dict)  # per team, messages of groups distill gave up on
    lag_p50_s: float | None = None  # over every pattern created in the window
    lag_p95_s: float | None = None

    @property
    def worst(self) -> Health:
        return max((s.verdict for s in self.signals), key=HEALTH_RANK.__getitem__, default="unknown")

    @property
    def exit_code(self) -> int:
        return 1 if any(s.verdict == "bad" for s in self.signals) else 0

    def series(self) -> list[tuple[str, list[float | None], str]]:
        """The key series (label, values oldest first, unit) shared by the text and HTML views."""
        n = self.nights
        out: list[tuple[str, list[float | None], str]] = [
            ("live episode vectors", [_f(x.size("vectors_episodes")) for x in n], ""),
            ("live patterns", [_f(x.size("patterns_live")) for x in n], ""),
            ("messages stored", [_f(x.size("episodes_total")) for x in n], ""),
            ("patterns added", [float(x.patterns_added) for x in n], ""),
            ("merges", [float(x.merges) if x.ran("reflect") else None for x in n], ""),
            ("open contradictions", [_f(x.size("contradictions_open")) for x in n], ""),
            ("duration", [x.duration_s for x in n], "s"),
            ("LLM tokens", [float(x.tokens) for x in n], ""),
            ("pattern lag p95", [x.lag_p95_s for x in n], "s"),
        ]
        if self.memory_index_sizes:
            out.append(("memory index entries", _align([float(v) for v in self.memory_index_sizes], len(n)), ""))
        return out


def build_report(
    graph: LedgerReader,
    n: int,
    memory_index_sizes: Sequence[int] | None = None,
    *,
    index_cap: int,
    grace_days: float,
    tz: str = "UTC",
    now: Time | None = None,
    given_up: Mapping[str, int] | None = None,
) -> Report:
    """The last ``n`` nights of the ledger (a scheduled night's team jobs merged into one; a run with
    no slot, such as a run-once or a watchdog distill, is one; dry runs skipped), oldest first, with the
    health verdicts.

    ``memory_index_sizes``: entries in the memory index per night, oldest first, when the caller
    keeps them; without them (and without sizes in the ledger) the index signal is "unknown".
    ``index_cap`` and ``grace_days``: ``memory_index.max_entries`` and ``decay.grace_hours`` / 24 of
    the caller's settings. ``tz``: IANA zone the times are shown in. ``given_up``: per team, the raw
    messages of the groups distill gave up on (``steps.distill.retry.given_up``), when the caller read them.
    """
    if n < 1:
        raise UsageError(f"--runs must be at least 1, got {n}")
    try:
        ZoneInfo(tz)  # fail early on a bad zone name, not halfway through rendering
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(f"unknown IANA time zone {tz!r}") from exc
    nights = ledger_nights(graph.night_runs(n), n)
    patterns = [p for t in graph.teams() for p in graph.patterns(t)]
    pinned = [p for p in patterns if p.pinned]
    open_cons = graph.contradictions(status="open")
    as_of = nights[-1].now if nights else (now or datetime.now(UTC))
    # A watchdog distill rebuilds one team's index: its size is no night's whole index.
    recorded = [x.memory_index_entries for x in nights if x.trigger != "watchdog"]
    if memory_index_sizes is not None:
        sizes: list[int] | None = list(memory_index_sizes)
    elif recorded and all(x is not None for x in recorded):
        sizes = [int(x) for x in recorded if x is not None]  # the ledger records it per team job: summed a night
    else:
        sizes = None
    lags = [lag for x in nights for lag in x.lags_s]
    return Report(
        generated_at=now or datetime.now(UTC),
        runs_requested=n,
        timezone=tz,
        nights=nights,
        signals=[
            store_growth_signal(nights, grace_days),
            merges_signal(nights),
            memory_index_signal(sizes, index_cap),
            pinned_facts_signal(pinned),
            failed_steps_signal(nights, given_up),
            contradictions_signal(nights, len(open_cons), min((c.opened_at for c in open_cons), default=None), as_of),
        ],
        memory_index_sizes=sizes,
        open_contradictions=len(open_cons),
        open_updates=sum(c.kind.value == "update" for c in open_cons),
        pinned_facts=len(pinned),
        given_up={t: n for t, n in sorted((given_up or {}).items()) if n},
        lag_p50_s=percentile(lags, 50),
        lag_p95_s=percentile(lags, 95),
    )


def _f(v: int | None) -> float | None:
    return None if v is None else float(v)


def _align(values: list[float], n: int) -> list[float | None]:
    """A caller's series aligned to the newest n nights (padded with gaps on the old side)."""
    vals: list[float | None] = list(values[-n:]) if n else []
    return [None] * (n - len(vals)) + vals
