"""The health signals: pure rules over the per-night figures, each giving a verdict and its reason.

They read nothing themselves, so the report (over many nights, with every pattern at hand) and the
metrics scrape (over a few nights, with store sizes only) judge with the same rules. What counts as
healthy (ops/runbook.md, "Is it healthy?"): store size grows with patterns, not with messages;
fewer duplicates to merge each run; a stable memory index; pinned facts untouched; no failed steps;
no pile of contradictions waiting for a person.

The thresholds that restate a setting (the memory index cap, decay's grace) are parameters: the
caller passes them from the Settings it runs with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Literal, TypeVar

from pydantic import BaseModel

from taskzilla_sleep.core.models import Pattern, PatternStatus
from taskzilla_sleep.observe.report.nights import Night

Health = Literal["ok", "watch", "bad", "unknown"]
HEALTH_RANK: dict[Health, int] = {"unknown": -1, "ok": 0, "watch": 1, "bad": 2}  # also the metrics gauge value
# Two weeks of the store growing with messages is long enough to call it bad rather than a phase.
GROWTH_BAD_DAYS = 14.0

T = TypeVar("T")


class Signal(BaseModel):
    """One rule's verdict on the window, with the figures that led to it (what an operator reads)."""

    name: str
    title: str
    verdict: Health
    reason: str


# -- the small maths the rules use -----------------------------------------------------------------


def slope(values: Sequence[float]) -> float:
    """Least-squares slope per step of the series (0 for fewer than two points)."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    den = sum((i - mx) ** 2 for i in range(n))
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / den


def halves(values: Sequence[float]) -> tuple[float, float]:
    """Means of the older and the newer half (the middle point of an odd series is in neither)."""
    h = len(values) // 2
    older, newer = values[:h], values[len(values) - h :]
    return (sum(older) / len(older) if older else 0.0, sum(newer) / len(newer) if newer else 0.0)


def pairs(xs: Sequence[T]) -> list[tuple[T, T]]:
    """Each value with the next one: night-to-night changes."""
    return list(zip(xs, xs[1:], strict=False))


# -- the rules ---------------------------------------------------------------------------------------


def store_growth_signal(nights: Sequence[Night], grace_days: float) -> Signal:
    """Store size must grow with patterns, not with messages: live episodes must not track intake.

    ``grace_days``: decay's grace (``decay.grace_hours`` / 24). Growth is judged only over windows
    longer than that: before it, every absorbed episode is legitimately still live.
    """
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
        verdict: Health = "ok" if d_live <= 0 else "watch"
        why = "no new messages" + ("" if d_live <= 0 else " yet the live store grew")
        return Signal(name="store_growth", title=title, verdict=verdict, reason=f"{facts}: {why}")
    kept = d_live / d_msgs
    growth = [
        float((b.size("vectors_episodes") or 0) - (a.size("vectors_episodes") or 0)) for a, b in pairs(with_sizes)
    ]
    older, newer = halves(growth)
    accelerating = len(growth) >= 4 and older > 0 and newer > 2 * older
    share = f"{kept:.0%} of new messages still live"
    if accelerating:
        verdict, why = ("bad" if kept > 0.6 else "watch"), f"{share} and growth is accelerating, not linear"
    elif days < grace_days:
        verdict, why = "unknown", f"{share}; window shorter than the decay grace, too early to judge"
    elif kept > 0.9 and days >= GROWTH_BAD_DAYS:
        verdict, why = "bad", f"{share}: decay and prune are not keeping up, the store grows with messages"
    elif kept > 0.9 or (kept > 0.6 and days >= 2 * grace_days):
        verdict, why = "watch", f"{share}: more than expected once decay has caught up"
    else:
        verdict, why = "ok", share
    return Signal(name="store_growth", title=title, verdict=verdict, reason=f"{facts}: {why}")


def merges_signal(nights: Sequence[Night]) -> Signal:
    """A healthy graph finds fewer new duplicates each run: merges per run must not rise."""
    title = "merges per run trending down"
    merges = [float(x.merges) for x in nights if x.ran("reflect")]
    if len(merges) < 3:
        return Signal(name="merges", title=title, verdict="unknown", reason=f"needs 3 reflect runs, has {len(merges)}")
    if not any(merges):
        return Signal(
            name="merges", title=title, verdict="ok", reason=f"0 merges in {len(merges)} reflect runs: no duplicates"
        )
    older, newer = halves(merges)
    s = slope(merges)
    facts = f"{older:.1f} → {newer:.1f} merges per run (older vs newer half of {len(merges)} reflect runs)"
    verdict: Health
    if s <= 0 or newer <= older:
        verdict, why = "ok", "flat or falling"
    elif newer >= 3 and newer > 2 * older:
        verdict, why = "bad", "high and rising: the write-discipline gate may need tightening"
    else:
        verdict, why = "watch", "rising"
    return Signal(name="merges", title=title, verdict=verdict, reason=f"{facts}: {why}")


def filling(a: int, b: int, cap: int) -> bool:
    """A night-to-night change that is the index filling up, not churn: it grew while it was still
    under half the cap. A new team's first weeks add a few patterns a night to an index of a handful
    of entries (0 → 4 is +∞ %, 2 → 5 is +150 %): relative change says nothing until it holds a fair
    share of what it will hold. A shrink is never filling, nor is growth once half full."""
    return a < b and a < cap / 2


def memory_index_signal(sizes: Sequence[int] | None, cap: int) -> Signal:
    """The memory index the bot loads should keep a steady size: drastic changes mean churn in what it knows.

    ``cap``: ``memory_index.max_entries``; an index above it was not cut as configured. While it is
    filling (:func:`filling`) growth is not judged: a normal first week must not read as bad. A
    shrink is judged at any size, and growth once the index is half full.
    """
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
    judged = [(a, b) for a, b in pairs(sizes) if not filling(a, b, cap)]
    facts = f"{sizes[0]} → {sizes[-1]} entries (cap {cap})"
    if not judged:
        return Signal(
            name="memory_index", title=title, verdict="ok", reason=f"{facts}: still filling (under half the cap)"
        )
    worst = max(abs(b - a) / max(a, 1) for a, b in judged)
    facts += f", largest change between nights {worst:.0%}"
    if len(judged) < len(sizes) - 1:
        facts += f" (not counting {len(sizes) - 1 - len(judged)} night(s) of filling up)"
    if any(a > 0 and b == 0 for a, b in judged) or worst > 0.5:
        return Signal(name="memory_index", title=title, verdict="bad", reason=f"{facts}: drastic churn")
    verdict: Health = "watch" if worst > 0.2 else "ok"
    return Signal(name="memory_index", title=title, verdict=verdict, reason=f"{facts}")


def pinned_fact_problems(pinned: Iterable[Pattern]) -> list[str]:
    """Why each pinned fact counts as touched: a pinned fact is never pruned, merged, decayed or rewritten.

    Allowed states: active at confidence 1.0, or retired by an explicit unpin. A ``fact_`` id is
    derived from the statement, so a rewritten statement no longer matches its own id.
    """
    from taskzilla_sleep.memory.facts import fact_id  # deferred: facts pulls in the Cypher store module

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
    """Pinned facts touched must be 0 (the scrape leaves this one out: it would read every pattern)."""
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


def failed_steps_signal(nights: Sequence[Night], given_up: Mapping[str, int] | None = None) -> Signal:
    """Failed steps = 0; a failure already followed by a clean night is 'watch', not an alarm — unless
    distill gave up on groups (``given_up``: per team, the raw messages of groups that got no usable
    answer on ``distill.max_attempts`` nights): then nothing has recovered until a person retries them."""
    title = "failed steps = 0"
    held = _given_up_line(given_up or {})
    if not nights:
        if held:
            return Signal(name="failed_steps", title=title, verdict="watch", reason=held)
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
            reason=f"last run: {s.step} failed: {s.error or 'no error recorded'}" + (f"; {held}" if held else ""),
        )
    if failed or abandoned or last.status == "incomplete" or held:
        bits = []
        if failed:
            steps = ", ".join(sorted({s.step for _, s in failed}))
            recovered = last.status == "ok" and not held
            bits.append(f"{len(failed)} failed step(s) earlier ({steps})" + (", since recovered" if recovered else ""))
        if abandoned:
            bits.append(f"{len(abandoned)} step(s) abandoned at a shutdown")
        if last.status == "incomplete":
            bits.append("the last run has not finished (still running, or the worker stopped mid-run)")
        if held:
            bits.append(held)
        return Signal(name="failed_steps", title=title, verdict="watch", reason="; ".join(bits))
    total = sum(len(x.steps) for x in nights)
    return Signal(
        name="failed_steps", title=title, verdict="ok", reason=f"0 failed of {total} steps in {len(nights)} runs"
    )


def _given_up_line(given_up: Mapping[str, int]) -> str:
    teams = {t: n for t, n in sorted(given_up.items()) if n}
    if not teams:
        return ""
    where = ", ".join(f"{t} {n}" for t, n in teams.items())
    retry = " ".join(f"--team {t}" for t in teams)
    return (
        f"distill gave up on groups without a usable answer: {sum(teams.values())} message(s) waiting ({where}); "
        f"`taskzilla-sleep distill retry {retry}` asks again"
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
    never_fell = all(b >= a for a, b in pairs([*series, open_now]))
    facts = f"{open_now} open ({start} at the start of the window)" + (
        "" if age is None else f", oldest {age:.1f} days"
    )
    verdict: Health
    if open_now >= 10 or (never_fell and open_now - start >= 3):
        verdict, why = "bad", "piling up: nobody is resolving them"
    elif open_now > start:
        verdict, why = "watch", "growing"
    elif age is not None and age > 7:
        verdict, why = "watch", "waiting for a person for over a week"
    else:
        verdict, why = "ok", "not growing"
    return Signal(name="contradictions", title=title, verdict=verdict, reason=f"{facts}: {why}")
