"""`taskzilla-sleep report`: nightly figures, trends and health verdicts for ops, from the run ledger.

Everything here reads the ledger the pipeline writes (``graph.runs(n)``) plus a few current facts
(pinned facts, open contradictions); nothing is written to the stores. The verdict rules are pure
functions over the per-night rows so ``metrics.py`` can expose the same verdicts without the report.

The health signals are SPEC §7 and seed 000 §5 (Kent's "healthy knowledge graph"): store growth
linear in patterns not in messages, merges per run trending down, a stable memory index, zero
pinned facts touched, plus two an operator needs every morning: no failed steps and no pile of
contradictions waiting for a person.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from taskzilla_sleep.errors import UsageError
from taskzilla_sleep.models import (
    Contradiction,
    Pattern,
    PatternStatus,
    Run,
    RunTrigger,
    StepName,
    StepResult,
    StepStatusName,
)

Verdict = Literal["ok", "watch", "bad", "unknown"]
NightStatus = Literal["ok", "failed", "incomplete"]

STEPS: tuple[StepName, ...] = ("prune", "distill", "reflect", "decay")
SPARKS = "▁▂▃▄▅▆▇█"
VERDICT_RANK: dict[Verdict, int] = {"unknown": -1, "ok": 0, "watch": 1, "bad": 2}
INDEX_CAP = 50  # memory_index.max_entries default; the seed's "near the 50-entry cap"
# Store growth is judged only over windows longer than decay's grace (72 h by default): before that
# every absorbed episode is legitimately still live. Two weeks is long enough to call a trend bad.
DECAY_GRACE_DAYS = 3.0
GROWTH_BAD_DAYS = 14.0

# Which step count feeds which per-night column (step, key in StepResult.counts).
COUNT_KEYS: dict[str, tuple[StepName, str]] = {
    "patterns_added": ("distill", "patterns_added"),
    "evidence_bumps": ("distill", "evidence_bumps"),
    "merges": ("reflect", "merges"),
    "contradictions_opened": ("reflect", "contradictions"),
    "absorbed": ("distill", "absorbed"),
    "retired": ("decay", "retired"),
    "pruned": ("prune", "pruned"),
}


class LedgerReader(Protocol):
    """What the report reads; CypherGraphStore (Neo4j and FalkorDB) has all of it."""

    def runs(self, n: int) -> list[Run]: ...

    def teams(self) -> list[str]: ...

    def patterns(self, team: str) -> list[Pattern]: ...

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]: ...


class StepFigures(BaseModel):
    step: StepName
    status: StepStatusName
    duration_s: float | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None


class Night(BaseModel):
    """One run of the ledger, flattened into what ops compare night to night."""

    run_id: str
    trigger: RunTrigger
    now: datetime
    slot: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    status: NightStatus
    steps: list[StepFigures] = Field(default_factory=list)
    patterns_added: int = 0
    evidence_bumps: int = 0
    merges: int = 0
    contradictions_opened: int = 0
    absorbed: int = 0
    retired: int = 0
    pruned: int = 0
    duration_s: float | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: at least one call's cost is unknown (unmapped model)
    sizes_before: dict[str, int] = Field(default_factory=dict)
    sizes_after: dict[str, int] = Field(default_factory=dict)
    lags_s: list[float] = Field(default_factory=list)  # availability lag of each pattern this run created
    lag_p50_s: float | None = None
    lag_p95_s: float | None = None

    def step(self, name: StepName) -> StepFigures | None:
        return next((s for s in self.steps if s.step == name), None)

    def ran(self, name: StepName) -> bool:
        s = self.step(name)
        return s is not None and s.status == "ok"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def size(self, key: str) -> int | None:
        """A store size after the run; live episode vectors fall back to the graph's live episodes."""
        if key == "vectors_episodes" and key not in self.sizes_after:
            key = "episodes_live"
        return self.sizes_after.get(key)


class Signal(BaseModel):
    name: str
    title: str
    verdict: Verdict
    reason: str


class Report(BaseModel):
    generated_at: datetime
    runs_requested: int
    timezone: str = "UTC"
    nights: list[Night] = Field(default_factory=list)  # oldest first
    signals: list[Signal] = Field(default_factory=list)
    memory_index_sizes: list[int] | None = None
    open_contradictions: int = 0
    open_updates: int = 0  # ... of which changes to confirm (the rest: people disagree)
    pinned_facts: int = 0
    lag_p50_s: float | None = None  # over every pattern created in the window
    lag_p95_s: float | None = None

    @property
    def worst(self) -> Verdict:
        return max((s.verdict for s in self.signals), key=VERDICT_RANK.__getitem__, default="unknown")

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

    def render_text(self) -> str:
        return render_text(self)


# -- building ------------------------------------------------------------------------------------


def build_report(
    graph: LedgerReader,
    n: int,
    memory_index_sizes: Sequence[int] | None = None,
    *,
    tz: str = "UTC",
    now: datetime | None = None,
) -> Report:
    """The last ``n`` runs of the ledger (dry runs skipped), oldest first, with the health verdicts.

    ``memory_index_sizes``: entries in the memory index per night, oldest first, when the caller
    keeps them; without them the index signal is "unknown". ``tz``: IANA zone the times are shown in.
    """
    if n < 1:
        raise UsageError(f"--runs must be at least 1, got {n}")
    try:
        ZoneInfo(tz)  # fail early on a bad zone name, not halfway through rendering
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(f"unknown IANA time zone {tz!r}") from exc
    runs = sorted(last_real_runs(graph, n), key=lambda r: (r.started_at, r.id))
    nights = [night_of(r) for r in runs]
    patterns = [p for t in graph.teams() for p in graph.patterns(t)]
    pinned = [p for p in patterns if p.pinned]
    open_cons = graph.contradictions(status="open")
    as_of = nights[-1].now if nights else (now or datetime.now(UTC))
    recorded = [r.memory_index_entries for r in runs]
    if memory_index_sizes is not None:
        sizes: list[int] | None = list(memory_index_sizes)
    elif recorded and all(x is not None for x in recorded):
        sizes = [int(x) for x in recorded if x is not None]  # the ledger records it per night
    else:
        sizes = None
    lags = [lag for x in nights for lag in x.lags_s]
    return Report(
        generated_at=now or datetime.now(UTC),
        runs_requested=n,
        timezone=tz,
        nights=nights,
        signals=[
            store_growth_signal(nights),
            merges_signal(nights),
            memory_index_signal(sizes),
            pinned_facts_signal(pinned),
            failed_steps_signal(nights),
            contradictions_signal(nights, len(open_cons), min((c.opened_at for c in open_cons), default=None), as_of),
        ],
        memory_index_sizes=sizes,
        open_contradictions=len(open_cons),
        open_updates=sum(c.kind.value == "update" for c in open_cons),
        pinned_facts=len(pinned),
        lag_p50_s=percentile(lags, 50),
        lag_p95_s=percentile(lags, 95),
    )


def last_real_runs(graph: LedgerReader, n: int) -> list[Run]:
    """The newest ``n`` runs that are not dry runs (the pipeline does not record dry runs; this is a guard)."""
    fetch = n
    for _ in range(3):  # each dry run found widens the next read by one; three reads is plenty
        got = graph.runs(fetch)
        real = [r for r in got if not r.dry_run]
        if len(real) >= n or len(got) < fetch:
            break
        fetch += len(got) - len(real)
    return real[:n]


def night_of(run: Run) -> Night:
    steps = [_step_figures(s) for s in run.steps]
    by = {s.step: s for s in steps}
    counts = {col: by[step].counts.get(key, 0) if step in by else 0 for col, (step, key) in COUNT_KEYS.items()}
    failed = any(s.status == "failed" for s in steps)
    finished = run.finished_at is not None and all(s.status in ("ok", "skipped", "failed") for s in steps)
    status: NightStatus = "failed" if failed else "ok" if finished else "incomplete"
    costs = [s.cost_usd for s in steps]
    return Night(
        run_id=run.id,
        trigger=run.trigger,
        now=run.now,
        slot=run.slot,
        started_at=run.started_at,
        finished_at=run.finished_at,
        status=status,
        steps=steps,
        duration_s=_seconds(run.started_at, run.finished_at),
        llm_calls=sum(s.llm_calls for s in steps),
        prompt_tokens=sum(s.prompt_tokens for s in steps),
        completion_tokens=sum(s.completion_tokens for s in steps),
        # One unknown step cost makes the night's cost unknown: a partial sum would under-report.
        cost_usd=None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6),
        sizes_before=dict(run.sizes_before),
        sizes_after=dict(run.sizes_after),
        lags_s=list(run.pattern_lags_s),
        lag_p50_s=percentile(run.pattern_lags_s, 50),
        lag_p95_s=percentile(run.pattern_lags_s, 95),
        **counts,
    )


def _step_figures(s: StepResult) -> StepFigures:
    return StepFigures(
        step=s.step,
        status=s.status,
        duration_s=_seconds(s.started_at, s.finished_at),
        counts=dict(s.counts),
        llm_calls=s.llm_calls,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        cost_usd=s.cost_usd,
        error=s.error,
    )


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else round((b - a).total_seconds(), 3)


# -- pure helpers --------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def sparkline(values: Sequence[float | None]) -> str:
    """▁▂▃▄▅▆▇█ scaled between the series' min and max; a gap (None) is a space."""
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    lo, hi = min(known), max(known)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi == lo:
            # A flat series shows as flat; the middle bar says "non-zero" without inventing a trend.
            out.append(SPARKS[0] if hi == 0 else SPARKS[3])
        else:
            out.append(SPARKS[min(len(SPARKS) - 1, int((v - lo) / (hi - lo) * (len(SPARKS) - 1) + 0.5))])
    return "".join(out)


def slope(values: Sequence[float]) -> float:
    """Least-squares slope per step of the series (0 for fewer than two points)."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    den = sum((i - mx) ** 2 for i in range(n))
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / den


def _halves(values: Sequence[float]) -> tuple[float, float]:
    """Means of the older and the newer half (the middle point of an odd series is in neither)."""
    h = len(values) // 2
    older, newer = values[:h], values[len(values) - h :]
    return (sum(older) / len(older) if older else 0.0, sum(newer) / len(newer) if newer else 0.0)


def _f(v: int | None) -> float | None:
    return None if v is None else float(v)


def _align(values: list[float], n: int) -> list[float | None]:
    """A caller's series aligned to the newest n nights (padded with gaps on the old side)."""
    vals: list[float | None] = list(values[-n:]) if n else []
    return [None] * (n - len(vals)) + vals


# -- health signals ------------------------------------------------------------------------------


def store_growth_signal(nights: Sequence[Night]) -> Signal:
    """SPEC §7: store size linear in patterns, not in messages (live episodes must not track intake)."""
    title = "store growth linear in patterns"
    with_sizes = [x for x in nights if x.size("vectors_episodes") is not None and x.size("episodes_total") is not None]
    if len(with_sizes) < 2:
        return Signal(name="store_growth", title=title, verdict="unknown", reason="needs two nights with store sizes")
    first, last = with_sizes[0], with_sizes[-1]
    # Baseline: the first night's sizes *before* it ran, so its own intake and decay count too.
    base = first.sizes_before or first.sizes_after
    live0 = base.get("vectors_episodes", base.get("episodes_live", 0))
    msgs0 = base.get("episodes_total", 0)
    pats0 = base.get("patterns_live", 0)
    live1 = last.size("vectors_episodes") or 0
    msgs1 = last.size("episodes_total") or 0
    pats1 = last.size("patterns_live") or 0
    d_live, d_msgs, d_pats = live1 - live0, msgs1 - msgs0, pats1 - pats0
    days = max(0.0, (last.now - first.now).total_seconds() / 86400)
    facts = f"live episodes {d_live:+d}, messages {d_msgs:+d}, live patterns {d_pats:+d} over {days:.1f} days"
    if d_msgs <= 0:
        verdict: Verdict = "ok" if d_live <= 0 else "watch"
        why = "no new messages" + ("" if d_live <= 0 else " yet the live store grew")
        return Signal(name="store_growth", title=title, verdict=verdict, reason=f"{facts}: {why}")
    kept = d_live / d_msgs
    growth = [
        float((b.size("vectors_episodes") or 0) - (a.size("vectors_episodes") or 0)) for a, b in _pairs(with_sizes)
    ]
    older, newer = _halves(growth)
    accelerating = len(growth) >= 4 and older > 0 and newer > 2 * older
    share = f"{kept:.0%} of new messages still live"
    if accelerating:
        verdict, why = ("bad" if kept > 0.6 else "watch"), f"{share} and growth is accelerating, not linear"
    elif days < DECAY_GRACE_DAYS:
        verdict, why = "unknown", f"{share}; window shorter than the decay grace, too early to judge"
    elif kept > 0.9 and days >= GROWTH_BAD_DAYS:
        verdict, why = "bad", f"{share}: decay and prune are not keeping up, the store grows with messages"
    elif kept > 0.9 or (kept > 0.6 and days >= 2 * DECAY_GRACE_DAYS):
        verdict, why = "watch", f"{share}: more than expected once decay has caught up"
    else:
        verdict, why = "ok", share
    return Signal(name="store_growth", title=title, verdict=verdict, reason=f"{facts}: {why}")


def merges_signal(nights: Sequence[Night]) -> Signal:
    """Seed 000 §5: a healthy graph finds fewer new duplicates each run."""
    title = "merges per run trending down"
    merges = [float(x.merges) for x in nights if x.ran("reflect")]
    if len(merges) < 3:
        return Signal(name="merges", title=title, verdict="unknown", reason=f"needs 3 reflect runs, has {len(merges)}")
    if not any(merges):
        return Signal(
            name="merges", title=title, verdict="ok", reason=f"0 merges in {len(merges)} reflect runs: no duplicates"
        )
    older, newer = _halves(merges)
    s = slope(merges)
    facts = f"{older:.1f} → {newer:.1f} merges per run (older vs newer half of {len(merges)} reflect runs)"
    verdict: Verdict
    if s <= 0 or newer <= older:
        verdict, why = "ok", "flat or falling"
    elif newer >= 3 and newer > 2 * older:
        verdict, why = "bad", "high and rising: the write-discipline gate may need tightening"
    else:
        verdict, why = "watch", "rising"
    return Signal(name="merges", title=title, verdict=verdict, reason=f"{facts}: {why}")


def memory_index_signal(sizes: Sequence[int] | None, cap: int = INDEX_CAP) -> Signal:
    """Seed 000 §5: a consistent index size; drastic changes mean churn in what the bot loads."""
    title = "memory index size stable"
    if not sizes:
        return Signal(name="memory_index", title=title, verdict="unknown", reason="index sizes not recorded")
    over = [v for v in sizes if v > cap]
    if over:
        return Signal(
            name="memory_index", title=title, verdict="bad", reason=f"{max(over)} entries exceed the cap of {cap}"
        )
    if len(sizes) == 1:
        return Signal(name="memory_index", title=title, verdict="ok", reason=f"{sizes[0]} entries (cap {cap})")
    jumps = [abs(b - a) / max(a, 1) for a, b in _pairs(sizes)]
    worst = max(jumps)
    facts = f"{sizes[0]} → {sizes[-1]} entries (cap {cap}), largest change between nights {worst:.0%}"
    if any(a > 0 and b == 0 for a, b in _pairs(sizes)) or worst > 0.5:
        return Signal(name="memory_index", title=title, verdict="bad", reason=f"{facts}: drastic churn")
    verdict: Verdict = "watch" if worst > 0.2 else "ok"
    return Signal(name="memory_index", title=title, verdict=verdict, reason=f"{facts}")


def pinned_fact_problems(pinned: Iterable[Pattern]) -> list[str]:
    """Why each pinned fact counts as touched; a pinned fact is immune to every step (SPEC §4).

    Allowed states: active at confidence 1.0, or retired by an explicit unpin. A ``fact_`` id is
    derived from the statement, so a rewritten statement no longer matches its own id.
    """
    from taskzilla_sleep.facts import fact_id  # deferred: facts pulls in the Cypher store module

    out: list[str] = []
    for p in pinned:
        why: list[str] = []
        if p.confidence != 1.0:
            why.append(f"confidence {p.confidence:.2f}")
        unpinned = p.status is PatternStatus.RETIRED and p.archived_reason == "unpinned"
        if p.status is not PatternStatus.ACTIVE and not unpinned:
            why.append(f"status {p.status.value}")
        if p.superseded_by:
            why.append(f"superseded by {p.superseded_by}")
        if p.id.startswith("fact_") and fact_id(p.team, p.statement) != p.id:
            why.append("statement rewritten")
        if why:
            out.append(f"{p.id}: {', '.join(why)}")
    return out


def pinned_facts_signal(pinned: Sequence[Pattern]) -> Signal:
    title = "pinned facts touched = 0"
    problems = pinned_fact_problems(pinned)
    if problems:
        more = f" (+{len(problems) - 2} more)" if len(problems) > 2 else ""
        return Signal(
            name="pinned_facts",
            title=title,
            verdict="bad",
            reason=f"{len(problems)} of {len(pinned)} touched: " + "; ".join(problems[:2]) + more,
        )
    reason = f"all {len(pinned)} pinned facts intact (confidence 1.0, unchanged)" if pinned else "no pinned facts yet"
    return Signal(name="pinned_facts", title=title, verdict="ok", reason=reason)


def failed_steps_signal(nights: Sequence[Night]) -> Signal:
    """Failed steps = 0; a failure already followed by a clean night is 'watch', not an alarm."""
    title = "failed steps = 0"
    if not nights:
        return Signal(name="failed_steps", title=title, verdict="unknown", reason="no runs in the ledger")
    failed = [(x, s) for x in nights for s in x.steps if s.status == "failed"]
    abandoned = [(x, s) for x in nights for s in x.steps if s.status == "abandoned"]
    last = nights[-1]
    last_failed = [s for s in last.steps if s.status == "failed"]
    if last_failed:
        s = last_failed[0]
        return Signal(
            name="failed_steps",
            title=title,
            verdict="bad",
            reason=f"last run: {s.step} failed: {s.error or 'no error recorded'}",
        )
    if failed or abandoned or last.status == "incomplete":
        bits = []
        if failed:
            steps = ", ".join(sorted({s.step for _, s in failed}))
            bits.append(
                f"{len(failed)} failed step(s) earlier ({steps})" + (", since recovered" if last.status == "ok" else "")
            )
        if abandoned:
            bits.append(f"{len(abandoned)} step(s) abandoned at a shutdown")
        if last.status == "incomplete":
            bits.append("the last run has not finished (still running, or the worker stopped mid-run)")
        return Signal(name="failed_steps", title=title, verdict="watch", reason="; ".join(bits))
    total = sum(len(x.steps) for x in nights)
    return Signal(
        name="failed_steps", title=title, verdict="ok", reason=f"0 failed of {total} steps in {len(nights)} runs"
    )


def contradictions_signal(
    nights: Sequence[Night], open_now: int, oldest_opened_at: datetime | None, as_of: datetime
) -> Signal:
    """Contradictions wait for a person; they must be resolved, not pile up.

    ``open_now``: open contradictions right now; ``oldest_opened_at``: when the oldest of them was
    opened, if known (the metrics scrape does not read them); ``as_of``: the clock ages are taken on.
    """
    title = "open contradictions not piling up"
    series = [v for v in (x.size("contradictions_open") for x in nights) if v is not None]
    if open_now == 0:
        return Signal(name="contradictions", title=title, verdict="ok", reason="none open")
    age = None if oldest_opened_at is None else max(0.0, (as_of - oldest_opened_at).total_seconds() / 86400)
    start = series[0] if series else open_now
    never_fell = all(b >= a for a, b in _pairs([*series, open_now]))
    facts = f"{open_now} open ({start} at the start of the window)" + (
        "" if age is None else f", oldest {age:.1f} days"
    )
    verdict: Verdict
    if open_now >= 10 or (never_fell and open_now - start >= 3):
        verdict, why = "bad", "piling up: nobody is resolving them"
    elif open_now > start:
        verdict, why = "watch", "growing"
    elif age is not None and age > 7:
        verdict, why = "watch", "waiting for a person for over a week"
    else:
        verdict, why = "ok", "not growing"
    return Signal(name="contradictions", title=title, verdict=verdict, reason=f"{facts}: {why}")


T = TypeVar("T")


def _pairs(xs: Sequence[T]) -> list[tuple[T, T]]:
    return list(zip(xs, xs[1:], strict=False))


# -- text view -----------------------------------------------------------------------------------


def render_text(report: Report) -> str:
    tz = ZoneInfo(report.timezone)
    nights = report.nights
    lines: list[str] = []
    if nights:
        span = f"{_day(nights[0].now, tz)} … {_day(nights[-1].now, tz)}"
        lines.append(f"taskzilla-sleep report: {len(nights)} runs ({span}), times in {report.timezone}")
    else:
        lines.append(f"taskzilla-sleep report: no runs in the ledger (asked for the last {report.runs_requested})")
    lines.append("")
    lines.append(f"health (worst: {report.worst})")
    width = max(len(s.title) for s in report.signals) if report.signals else 0
    for s in report.signals:
        lines.append(f"  [{s.verdict:<7}] {s.title:<{width}}  {s.reason}")
    if not nights:
        return "\n".join(lines)

    lines += ["", "trends, oldest → newest"]
    for label, values, unit in report.series():
        known = [v for v in values if v is not None]
        if not known:
            continue
        lines.append(
            f"  {label:<21} {sparkline(values)}  {_num(known[0], unit)} → {_num(known[-1], unit)}"
            f"  (min {_num(min(known), unit)}, max {_num(max(known), unit)})"
        )
    lag = f"pattern availability lag over the window: p50 {_dur(report.lag_p50_s)}, p95 {_dur(report.lag_p95_s)}"
    lines += [
        "",
        lag,
        f"pinned facts {report.pinned_facts}, open contradictions {report.open_contradictions} "
        f"({report.open_updates} changes to confirm, {report.open_contradictions - report.open_updates} disagreements)",
    ]

    lines += ["", "what each night did"]
    lines += _table(
        ["night", "trigger", "status", "+pat", "bumps", "merges", "contra", "absorb", "retire", "prune"],
        [
            [
                _when(x.now, tz),
                x.trigger,
                x.status,
                *[str(getattr(x, c)) for c in COUNT_KEYS],  # the header follows COUNT_KEYS' order
            ]
            for x in nights
        ],
        text_columns=3,
    )
    lines += ["", "what it cost (seconds per step; FAIL/skip/— = failed, skipped, not run)"]
    lines += _table(
        ["night", *STEPS, "total", "LLM calls", "tokens in/out", "cost $", "lag p50", "lag p95"],
        [
            [
                _when(x.now, tz),
                *[_step_cell(x.step(st)) for st in STEPS],
                _secs(x.duration_s),
                str(x.llm_calls),
                f"{x.prompt_tokens:,}/{x.completion_tokens:,}",
                "unknown" if x.cost_usd is None else f"{x.cost_usd:.4f}",
                _dur(x.lag_p50_s),
                _dur(x.lag_p95_s),
            ]
            for x in nights
        ],
        text_columns=1,
    )
    lines += ["", "store sizes, before → after"]
    lines += _table(
        ["night", "messages", "live episodes", "live patterns", "open contra", "tombstones"],
        [
            [
                _when(x.now, tz),
                *[
                    _before_after(x, k)
                    for k in (
                        "episodes_total",
                        "vectors_episodes",
                        "patterns_live",
                        "contradictions_open",
                        "tombstones",
                    )
                ],
            ]
            for x in nights
        ],
        text_columns=1,
    )
    errors = [(x, s) for x in nights for s in x.steps if s.error]
    if errors:
        lines += ["", "errors"]
        lines += [f"  {_when(x.now, tz)} {s.step}: {s.error}" for x, s in errors]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[str]], text_columns: int) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    # The first columns are text (left-aligned); figures line up on the right.
    def fmt(r: list[str]) -> str:
        return "  " + "  ".join(
            c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return [fmt(header), "  " + "  ".join("─" * w for w in widths), *[fmt(r) for r in rows]]


def _step_cell(s: StepFigures | None) -> str:
    if s is None:
        return "—"
    if s.status == "ok":
        return _secs(s.duration_s)
    if s.status == "failed":
        return "FAIL " + _secs(s.duration_s)
    if s.status == "skipped":
        return "skip"
    return s.status


def _before_after(x: Night, key: str) -> str:
    before = x.sizes_before.get(key, x.sizes_before.get("episodes_live") if key == "vectors_episodes" else None)
    after = x.size(key)
    if before is None and after is None:
        return "—"
    return f"{'?' if before is None else f'{before:,}'} → {'?' if after is None else f'{after:,}'}"


def _when(t: datetime, tz: ZoneInfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def _day(t: datetime, tz: ZoneInfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d")


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "s":
        return _dur(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def _secs(s: float | None) -> str:
    """Step durations in a table column: always seconds, so the column compares at a glance."""
    if s is None:
        return "—"
    return f"{s:.2f}" if s < 10 else f"{s:.1f}" if s < 100 else f"{s:,.0f}"


def _dur(s: float | None) -> str:
    """Seconds as a person reads them: 0.42s, 38s, 12m, 3.5h."""
    if s is None:
        return "—"
    if s < 10:
        return f"{s:.2f}s"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


# -- HTML view -----------------------------------------------------------------------------------

COLORS = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563")
STEP_COLORS: dict[StepName, str] = {"prune": "#64748b", "distill": "#2563eb", "reflect": "#9333ea", "decay": "#d97706"}

CSS = """
:root { --ok: #1a7f37; --watch: #b7791f; --bad: #cf222e; --unknown: #6e7781; --ink: #1f2328; --muted: #59636e;
  --line: #d1d9e0; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: var(--bg); }
header { background: #0d1117; color: #f0f6fc; padding: 18px 28px; display: flex; align-items: baseline;
  justify-content: space-between; flex-wrap: wrap; gap: 8px; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header .meta { color: #9198a1; font-size: 13px; }
main { padding: 20px 28px 40px; max-width: 1400px; margin: 0 auto; }
h2 { font-size: 15px; margin: 26px 0 10px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.overall { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-size: 13px;
  font-weight: 600; margin-left: 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-left: 6px solid var(--unknown); border-radius: 6px;
  padding: 10px 14px; }
.card .head { display: flex; justify-content: space-between; align-items: center; gap: 8px; }
.card .title { font-weight: 600; }
.card .reason { color: var(--muted); font-size: 13px; margin-top: 4px; }
.badge { font-size: 11px; font-weight: 700; text-transform: uppercase; padding: 1px 8px; border-radius: 10px;
  color: #fff; background: var(--unknown); }
.v-ok { border-left-color: var(--ok); } .b-ok { background: var(--ok); }
.v-watch { border-left-color: var(--watch); } .b-watch { background: var(--watch); }
.v-bad { border-left-color: var(--bad); } .b-bad { background: var(--bad); }
.v-unknown { border-left-color: var(--unknown); } .b-unknown { background: var(--unknown); }
.kpis { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; }
.kpi { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
.kpi .label { color: var(--muted); font-size: 12px; }
.kpi .value { font-size: 22px; font-weight: 600; }
.kpi .sub { color: var(--muted); font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 14px; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px 8px; }
.chart h3 { margin: 0 0 4px; font-size: 14px; }
.chart svg { width: 100%; height: auto; display: block; }
.legend { font-size: 12px; color: var(--muted); display: flex; flex-wrap: wrap; gap: 12px; margin-top: 2px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
svg .grid { stroke: #eaeef2; stroke-width: 1; }
svg .axis { stroke: #afb8c1; stroke-width: 1; }
svg text { font-size: 11px; fill: #59636e; font-family: inherit; }
svg .empty { font-size: 13px; fill: #8c959f; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); font-size: 13px; }
th, td { padding: 5px 8px; border-bottom: 1px solid #eaeef2; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; font-weight: 600; color: var(--muted); }
td.l, th.l { text-align: left; }
tr.failed td { background: #ffebe9; }
td.fail { color: var(--bad); font-weight: 600; }
td.dim { color: #8c959f; }
td.st-ok { color: var(--ok); font-weight: 600; } td.st-failed { color: var(--bad); font-weight: 600; }
td.st-incomplete { color: var(--watch); font-weight: 600; }
.scroll { overflow-x: auto; }
footer { color: var(--muted); font-size: 12px; margin-top: 28px; }
"""


def write_html(report: Report, path: Path) -> Path:
    """One self-contained static page (inline CSS and SVG, no script, no network); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(report), encoding="utf-8")
    tmp.replace(path)  # atomic: a browser refreshing the page never reads half a file
    return path


def render_html(report: Report) -> str:
    tz = ZoneInfo(report.timezone)
    nights = report.nights
    labels = [x.now.astimezone(tz).strftime("%m-%d %H:%M") for x in nights]
    e = html.escape
    worst = report.worst
    window = f"{len(nights)} runs, {_day(nights[0].now, tz)} … {_day(nights[-1].now, tz)}" if nights else "no runs yet"
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/>',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
        f"<title>taskzilla-sleep report: {e(worst)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>taskzilla-sleep · consolidation report</h1>",
        f'<div class="meta">{e(window)} · times in {e(report.timezone)} · generated '
        f"{e(report.generated_at.astimezone(tz).strftime('%Y-%m-%d %H:%M'))}</div></header><main>",
        f'<h2>Health <span class="overall b-{worst}">{e(worst)}</span></h2><div class="cards">',
    ]
    for s in report.signals:
        parts.append(
            f'<div class="card v-{s.verdict}"><div class="head"><span class="title">{e(s.title)}</span>'
            f'<span class="badge b-{s.verdict}">{e(s.verdict)}</span></div>'
            f'<div class="reason">{e(s.reason)}</div></div>'
        )
    parts.append("</div>")
    if nights:
        parts.append(_kpis(report))
        parts.append('<h2>Trends</h2><div class="charts">')
        parts += _charts(report, labels)
        parts.append("</div>")
        parts.append(_nights_table(report, tz))
    parts.append(
        "<footer>Verdicts: ok · watch (look at it this week) · bad (act now; the report exits 1) · unknown (not "
        "enough data). Sources: the run ledger in the graph store; store growth per SPEC §7, merges and index "
        "stability per seed 000 §5.</footer></main></body></html>"
    )
    return "\n".join(parts)


def _kpis(report: Report) -> str:
    last = report.nights[-1]
    items = [
        ("last run", last.status, f"{last.trigger}, {_dur(last.duration_s)}"),
        ("live patterns", _num(_f(last.size("patterns_live")), ""), f"{last.patterns_added} added last run"),
        ("live episodes", _num(_f(last.size("vectors_episodes")), ""), f"{last.retired} retired last run"),
        (
            "open contradictions",
            str(report.open_contradictions),
            f"{report.open_updates} changes to confirm; {last.contradictions_opened} opened last run",
        ),
        ("pattern lag p50 / p95", f"{_dur(report.lag_p50_s)} / {_dur(report.lag_p95_s)}", "over the window"),
        (
            "LLM last run",
            f"{last.llm_calls} calls",
            f"{last.tokens:,} tokens, " + ("cost unknown" if last.cost_usd is None else f"${last.cost_usd:.4f}"),
        ),
    ]
    cells = "".join(
        f'<div class="kpi"><div class="label">{html.escape(a)}</div><div class="value">{html.escape(b)}</div>'
        f'<div class="sub">{html.escape(c)}</div></div>'
        for a, b, c in items
    )
    return f'<h2>Last run</h2><div class="kpis">{cells}</div>'


ChartSeries = list[tuple[str, list[float | None], str]]
ChartKind = Literal["line", "bar", "stacked"]


def _charts(report: Report, labels: list[str]) -> list[str]:
    n = report.nights
    size = {lbl: vals for lbl, vals, _ in report.series()}
    charts: list[tuple[str, ChartKind, ChartSeries, str]] = [
        (
            "Store size after each run (linear in patterns, not in messages)",
            "line",
            [
                ("messages stored", size["messages stored"], COLORS[6]),
                ("live episode vectors", size["live episode vectors"], COLORS[0]),
                ("live patterns", size["live patterns"], COLORS[1]),
            ],
            "",
        ),
        (
            "What each run did",
            "bar",
            [
                ("patterns added", [float(x.patterns_added) for x in n], COLORS[0]),
                ("evidence bumps", [float(x.evidence_bumps) for x in n], COLORS[5]),
                ("merges", [float(x.merges) for x in n], COLORS[3]),
                ("contradictions opened", [float(x.contradictions_opened) for x in n], COLORS[4]),
            ],
            "",
        ),
        (
            "Episodes leaving the live store",
            "bar",
            [
                ("absorbed", [float(x.absorbed) for x in n], COLORS[0]),
                ("retired", [float(x.retired) for x in n], COLORS[2]),
                ("pruned", [float(x.pruned) for x in n], COLORS[6]),
            ],
            "",
        ),
        (
            "Duration per step",
            "stacked",
            [(st, [_step_duration(x, st) for x in n], STEP_COLORS[st]) for st in STEPS],
            "s",
        ),
        (
            "LLM tokens per run",
            "stacked",
            [
                ("prompt", [float(x.prompt_tokens) for x in n], COLORS[0]),
                ("completion", [float(x.completion_tokens) for x in n], COLORS[2]),
            ],
            "",
        ),
        (
            "Pattern availability lag",
            "line",
            [("p50", [x.lag_p50_s for x in n], COLORS[0]), ("p95", [x.lag_p95_s for x in n], COLORS[4])],
            "s",
        ),
        ("Open contradictions", "line", [("open", size["open contradictions"], COLORS[4])], ""),
    ]
    if "memory index entries" in size:
        charts.append(("Memory index entries", "line", [("entries", size["memory index entries"], COLORS[1])], ""))
    out = []
    for title, kind, series, unit in charts:
        legend = "".join(f'<span><i style="background:{c}"></i>{html.escape(name)}</span>' for name, _, c in series)
        out.append(
            f'<div class="chart"><h3>{html.escape(title)}</h3>{svg_chart(labels, series, kind, unit)}'
            f'<div class="legend">{legend}</div></div>'
        )
    return out


def _step_duration(x: Night, step: StepName) -> float | None:
    s = x.step(step)
    return s.duration_s if s is not None else None


# Steps a person reads on a time axis: seconds, then whole minutes, then whole hours.
TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def axis_ticks(peak: float, integer: bool = True, seconds: bool = False) -> list[float]:
    """Round y-axis ticks from 0 to at or above ``peak``, about 4 of them.

    Steps are 1, 2, 2.5 or 5 × 10^k; counts get whole-number steps only (no "3.75 merges"); a time
    axis past two minutes steps in whole minutes or hours (no "33m").
    """
    if peak <= 0:
        return [0.0, 1.0]
    raw = peak / 4
    if seconds and raw > 30:
        step = float(next((t for t in TIME_STEPS if t >= raw), math.ceil(raw / 86400) * 86400))
    else:
        mag: float = 10.0 ** math.floor(math.log10(raw))
        candidates = [m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0)]
        if integer:
            candidates = [c for c in candidates if c >= 1 and float(c).is_integer()] or [1.0]
        step = next((c for c in candidates if c >= raw * (1 - 1e-9)), candidates[-1])
    count = max(1, math.ceil(peak / step - 1e-9))
    return [step * k for k in range(count + 1)]


def svg_chart(
    labels: Sequence[str],
    series: ChartSeries,
    kind: ChartKind,
    unit: str = "",
    width: int = 560,
    height: int = 210,
) -> str:
    """An inline SVG chart: a line chart, grouped bars or stacked bars over the runs."""
    left, right, top, bottom = 54, 10, 10, 38
    pw, ph = width - left - right, height - top - bottom
    n = len(labels)
    head = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img">'
    if kind == "stacked":
        totals = [sum(v[i] or 0.0 for _, v, _ in series) for i in range(n)]
        peak = max(totals, default=0.0)
    else:
        peak = max((v for _, vals, _ in series for v in vals if v is not None), default=0.0)
    if n == 0 or not any(v is not None for _, vals, _ in series for v in vals):
        return head + f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>'
    ticks = axis_ticks(peak, integer=unit != "s", seconds=unit == "s")
    top_v = ticks[-1]

    def ys(value: float) -> float:
        return top + ph - (value / top_v) * ph

    out = [head]
    for tick in ticks:
        y = ys(tick)
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{html.escape(_axis(tick, unit))}</text>')
    out.append(f'<line class="axis" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}"/>')
    if peak == 0:
        # Say it: an empty-looking chart reads as "broken" unless it says the figures were zero.
        out.append(f'<text class="empty" x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle">')
        out.append("all zero in this window</text>")
    slot = pw / n
    every = max(1, math.ceil(n / 12))  # at most ~12 x labels, whatever the window
    for i, lab in enumerate(labels):
        if i % every == 0 or i == n - 1:
            x = left + slot * (i + 0.5)
            day, _, clock = lab.partition(" ")
            out.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{html.escape(day)}</text>')
            out.append(f'<text x="{x:.1f}" y="{top + ph + 28}" text-anchor="middle">{html.escape(clock)}</text>')
    if kind == "line":
        for name, vals, color in series:
            pts = [(left + slot * (i + 0.5), ys(v), v, i) for i, v in enumerate(vals) if v is not None]
            segs: list[list[tuple[float, float]]] = [[]]
            for i, v in enumerate(vals):
                if v is None:
                    segs.append([])
                else:
                    segs[-1].append((left + slot * (i + 0.5), ys(v)))
            for seg in segs:
                if len(seg) > 1:
                    d = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
                    out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2.2" points="{d}"/>')
            for x, y, v, i in pts:
                tip = html.escape(f"{name} {labels[i]}: {_num(v, unit)}")
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{color}"><title>{tip}</title></circle>')
    else:
        inner = slot * 0.72
        for i in range(n):
            x0 = left + slot * i + (slot - inner) / 2
            base = 0.0
            for j, (name, vals, color) in enumerate(series):
                v = vals[i]
                if v is None or v <= 0:
                    continue
                tip = html.escape(f"{name} {labels[i]}: {_num(v, unit)}")
                if kind == "stacked":
                    y1, y0 = ys(base + v), ys(base)
                    base += v
                    bx, bw = x0, inner
                else:
                    bw = inner / len(series)
                    bx, y1, y0 = x0 + j * bw, ys(v), ys(0.0)
                out.append(
                    f'<rect x="{bx:.1f}" y="{y1:.1f}" width="{max(bw - 1, 1):.1f}" height="{max(y0 - y1, 0.8):.1f}" '
                    f'fill="{color}" rx="1"><title>{tip}</title></rect>'
                )
    out.append("</svg>")
    return "".join(out)


def _axis(v: float, unit: str) -> str:
    if unit == "s":
        if v == 0:
            return "0"
        return f"{v:g}s" if v < 60 else f"{v / 60:g}m" if v < 3600 else f"{v / 3600:g}h"
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    return f"{v:g}"


def _nights_table(report: Report, tz: ZoneInfo) -> str:
    """Two tables (what each run did; what it cost and left behind), newest first: the run an operator asks
    about is on top, and each fits a laptop screen without scrolling sideways."""
    e = html.escape
    did = {
        "+patterns": "patterns added",
        "bumps": "evidence bumps on existing patterns",
        "merges": "duplicate patterns merged",
        "contra": "contradictions opened",
        "absorbed": "episodes absorbed into patterns",
        "retired": "absorbed episodes retired by decay",
        "pruned": "stale episodes pruned",
    }
    head1 = (
        '<h2>Runs: seconds per step and what changed</h2><div class="scroll"><table><tr><th class="l">night</th>'
        '<th class="l">trigger</th><th class="l">status</th>'
        + "".join(f'<th title="{s}: seconds">{s}</th>' for s in STEPS)
        + "<th>total</th>"
        + "".join(f'<th title="{e(long)}">{e(c)}</th>' for c, long in did.items())
        + "</tr>"
    )
    head2 = (
        '<h2>Runs: LLM, lag and store sizes (before → after)</h2><div class="scroll"><table><tr>'
        '<th class="l">night</th><th>LLM calls</th><th>tokens in / out</th><th>cost $</th><th>lag p50</th>'
        "<th>lag p95</th><th>messages</th><th>live episodes</th><th>live patterns</th><th>open contradictions</th>"
        "<th>tombstones</th></tr>"
    )
    rows1, rows2 = [], []
    for x in reversed(report.nights):
        when = f'<td class="l">{e(_when(x.now, tz))}</td>'
        cells = [when, f'<td class="l">{e(x.trigger)}</td>', f'<td class="l st-{x.status}">{e(x.status)}</td>']
        for st in STEPS:
            s = x.step(st)
            cls = "fail" if s is not None and s.status == "failed" else "dim" if s is None or s.status != "ok" else ""
            tip = f' title="{e(s.error)}"' if s is not None and s.error else ""
            cells.append(f'<td class="{cls}"{tip}>{e(_step_cell(s))}</td>')
        cells.append(f"<td>{e(_dur(x.duration_s))}</td>")
        counts = [x.patterns_added, x.evidence_bumps, x.merges, x.contradictions_opened, x.absorbed, x.retired]
        cells += [f'<td class="{"" if v else "dim"}">{v}</td>' for v in [*counts, x.pruned]]
        rows1.append(f'<tr class="{"failed" if x.status == "failed" else ""}">{"".join(cells)}</tr>')
        figures = [
            str(x.llm_calls),
            f"{x.prompt_tokens:,} / {x.completion_tokens:,}",
            "unknown" if x.cost_usd is None else f"{x.cost_usd:.4f}",
            _dur(x.lag_p50_s),
            _dur(x.lag_p95_s),
            *[
                _before_after(x, k)
                for k in ("episodes_total", "vectors_episodes", "patterns_live", "contradictions_open", "tombstones")
            ],
        ]
        rows2.append("<tr>" + when + "".join(f"<td>{e(v)}</td>" for v in figures) + "</tr>")
    return head1 + "".join(rows1) + "</table></div>" + head2 + "".join(rows2) + "</table></div>"


# -- the command ---------------------------------------------------------------------------------


def report_command(
    graph: LedgerReader,
    n: int,
    as_json: bool,
    html_path: Path,
    *,
    memory_index_sizes: Sequence[int] | None = None,
    tz: str = "UTC",
) -> tuple[str, int]:
    """`taskzilla-sleep report`: (text to print, exit code); exit 1 when any verdict is "bad".

    The HTML page is always written to ``html_path`` (the text view names it) so an operator can
    open the charts in a browser without a server.
    """
    report = build_report(graph, n, memory_index_sizes, tz=tz)
    written = write_html(report, html_path)
    if as_json:
        text = json.dumps(report.model_dump(mode="json") | {"html": str(written)}, indent=2)
    else:
        text = report.render_text() + f"\n\ncharts: {written}"
    return text, report.exit_code


__all__ = [
    "LedgerReader",
    "Night",
    "Report",
    "Signal",
    "Verdict",
    "build_report",
    "night_of",
    "percentile",
    "report_command",
    "sparkline",
    "write_html",
]
