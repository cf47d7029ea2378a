"""One night in plain text (run-once, demo, the nightly chat summary) and a dry run's plan.

Unlike the ops report over many nights, this tells what one night changed: the patterns it
distilled, the episodes they absorbed, the contradictions it flagged and how to resolve them.
"""

from __future__ import annotations

from collections.abc import Sequence

from taskzilla_sleep.core.models import Contradiction, ContradictionKind, Pattern, Run
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.night.budget import Estimate
from taskzilla_sleep.night.pipeline import NightResult
from taskzilla_sleep.night.steps.decay import DecayPlan
from taskzilla_sleep.night.steps.distill import DistillPlan
from taskzilla_sleep.night.steps.prune import PrunePlan
from taskzilla_sleep.night.steps.reflect import ReflectPlan
from taskzilla_sleep.rules.resolution import resolve_command
from taskzilla_sleep.stores.ports import GraphStore


def render_plan(result: NightResult) -> str:
    lines = [f"dry run at {result.run.now.isoformat()}: nothing was written. The plan:"]
    for res in result.run.steps:
        plans = result.plans.get(res.step, [])
        body = [ln for p in plans for ln in p.lines()]
        status = "" if res.status == "ok" else f" ({res.status}{': ' + res.error if res.error else ''})"
        lines.append(f"\n[{res.step}]{status} " + ", ".join(f"{k} {v}" for k, v in res.counts.items() if v))
        lines += [f"  {ln}" for ln in body] or ["  (no changes)"]
    if result.deferred:
        lines.append("\ndeferred (the LLM budget or the window ran out):")
        lines += [f"  {line}" for line in result.deferred]
    lines.append("\n" + plan_totals(result))
    return "\n".join(lines)


def night_changed(result: NightResult) -> bool:
    """Whether the night changed the memory: a plan with something in it (patterns added, bumped or
    rescored, contradictions, merges, links, retirements, prunes) or a repair. A night that only
    looked (e.g. a new, empty install) changed nothing, and gets no chat summary."""
    if result.repaired_drift or result.resumed or result.quarantined:
        return True
    return any(not plan.empty() for plans in result.plans.values() for plan in plans)


# Counts of what a step looked at or left waiting, not of what it would change.
OBSERVED = frozenset(
    {"examined", "episodes_read", "waiting", "compared", "unrelated", "unanswered", "deferred_groups"}
) | {k for k in Estimate().counts()}


def plan_totals(result: NightResult) -> str:
    """A dry run's last line: per step, what it would change (its non-zero change counts)."""
    parts = []
    for res in result.run.steps:
        changes = [f"{k} {v}" for k, v in res.counts.items() if v and k not in OBSERVED]
        status = "" if res.status == "ok" else f" ({res.status})"
        parts.append(f"{res.step}{status}: {', '.join(changes) or 'no changes'}")
    return "totals, would change: " + "; ".join(parts)


def created_in(graph: GraphStore, runs: Sequence[Run]) -> list[Pattern]:
    """The patterns a scheduled night's team jobs (``runs``, of one slot) created: their teams' patterns
    created from the night's clock to its last job's end (a team job's distill stamps them with its slot)."""
    real = [r for r in runs if not r.dry_run and r.team is not None]
    ends = [r.finished_at for r in real if r.finished_at is not None]
    if not real or not ends:
        return []
    start, end = min(r.now for r in real), max(ends)
    teams = sorted({r.team for r in real if r.team is not None})
    return [p for t in teams for p in graph.patterns(t) if start <= p.created_at <= end]


def render_night(result: NightResult, graph: GraphStore, learnt: Sequence[Pattern] | None = None) -> str:
    """``learnt``: a night merged from the ledger has no plans; the patterns it created (``created_in``)."""
    run = result.run
    out = [f"night {run.id} at {run.now.isoformat()} ({run.trigger})"]
    if result.repaired_drift:
        out.append(f"  repaired {result.repaired_drift} drifted vectors left by an earlier crash")
    for what in result.resumed:
        step, _, team = what.partition(":")
        out.append(f"  finished the {step} of team {team} that an earlier run left half-applied (from its journal)")
    if result.quarantined:
        out.append(f"  quarantined {result.quarantined} stored items that could not be read (see the log)")
    for s in run.steps:
        dur = (s.finished_at - s.started_at).total_seconds() if s.finished_at and s.started_at else 0.0
        counts = ", ".join(f"{k} {v}" for k, v in s.counts.items() if v) or "no changes"
        llm = f"; llm calls {s.llm_calls}, tokens {s.prompt_tokens}+{s.completion_tokens}" if s.llm_calls else ""
        err = f" — {s.error}" if s.error else ""
        out.append(f"  {s.step:8} {s.status:7} {dur:6.2f}s  {counts}{llm}{err}")

    changes = [c for p in result.plans_of(DistillPlan) for c in p.changes]
    distilled = [c.pattern for c in changes if c.action in ("add", "bump")] or list(learnt or [])
    if distilled:
        # Shown as they stand after the whole night (reflect may have contested some since distill).
        now_ = {p.id: p for p in graph.patterns_by_id([p.id for p in distilled])}
        out.append("\npatterns distilled:")
        out += [_pattern_line(now_.get(p.id, p)) for p in distilled]
    absorbed = [(c.pattern.id, c.absorb) for c in changes if c.absorb]
    if absorbed:
        out.append("\nepisodes absorbed (retired after the grace period):")
        eps = {e.id: e for e in graph.get_episodes([i for _, ids in absorbed for i in ids])}
        for pid, ids in absorbed:
            out.append(f"  into {pid}:")
            out += [f"    {i} {one_line(eps[i].text, 80) if i in eps else ''}" for i in ids]
    opened = [(c, old, new) for p in result.plans_of(ReflectPlan) for c, old, new in p.contradictions]
    updates = [x for x in opened if x[0].kind is ContradictionKind.UPDATE]
    if updates:
        out.append(
            "\nchanges flagged to people to confirm (both beliefs kept; the new one stays in use, marked "
            "awaiting confirmation; the old one contested):"
        )
        for c, old, new in updates:
            out += _contradiction_lines(c, old, new)
    disagreements = [x for x in opened if x[0].kind is not ContradictionKind.UPDATE]
    if disagreements:
        out.append("\ndisagreements flagged to people (both beliefs kept, both contested):")
        for c, old, new in disagreements:
            out += _contradiction_lines(c, old, new)
    merges = [m for p in result.plans_of(ReflectPlan) for m in p.merges]
    if merges:
        out.append("\nmerged (same belief, older id kept):")
        out += [f"  {m.drop.id} -> {m.keep.id}: {one_line(m.keep.statement, 80)}" for m in merges]
    retired = [(e, pid) for p in result.plans_of(DecayPlan) for e, pid in p.retire]
    if retired:
        out.append(f"\nretired {len(retired)} absorbed episodes (tombstones kept):")
        out += [f"  {e.id} (fed {pid})" for e, pid in retired[:20]]
    pruned = [e for p in result.plans_of(PrunePlan) for e in p.prune]
    if pruned:
        out.append(f"\npruned {len(pruned)} stale, unmatched episodes (tombstones kept)")
    if result.deferred:
        out.append("\ndeferred (the LLM budget or the window ran out; the rest is pending, taken first next night):")
        out += [f"  {line}" for line in result.deferred]
    if result.notes.get("stale"):
        out.append("\nstale beliefs (not seen for a long time; listed, never removed):")
        out += [f"  {s}" for s in result.notes["stale"]]
    return "\n".join(out)


def _pattern_line(p: Pattern) -> str:
    head = f"  {p.id} [{p.status.value} {p.confidence:.2f}, {p.support_count} episodes, {p.kind.value}]"
    return f"{head} {one_line(p.statement, 90)}"


def _contradiction_lines(c: Contradiction, old: Pattern, new: Pattern) -> list[str]:
    lines = [
        f"  {c.id} ({c.kind.value}):",
        f"    old belief {old.id} ({old.support_count} episodes): {one_line(old.statement, 90)}",
        f"    new belief {new.id} ({new.support_count} episodes, since {new.first_seen.date()}): "
        f"{one_line(new.statement, 90)}",
    ]
    if c.kind is ContradictionKind.UPDATE:
        lines.append(f"    confirm: {resolve_command(c.id, keep='new')}")
    lines.append(f"    resolve: {resolve_command(c.id)}")
    return lines
