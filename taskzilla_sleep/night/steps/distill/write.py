"""Distill's writes, write-ahead: the plan goes to a journal in the graph first, then it is applied.

Order: the journal (one write); one graph write per pattern (pattern + evidence links + absorption);
the vectors of the patterns written (one call); the episodes' marks; and last, in one write, the time
of this distill with the journal's end. A crash anywhere in between is finished from the journal
when the next run starts (before any step plans): the rerun applies the first attempt's decisions
instead of re-deciding from stores the crash left half-written, so it ends where an uninterrupted
run ends.
"""

from __future__ import annotations

import json

import structlog

from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import PATTERN_LIVE, EpisodeStatus, Pattern, to_ms
from taskzilla_sleep.memory.meta_keys import DISTILL_DEFERRED as DEFERRED
from taskzilla_sleep.memory.meta_keys import DISTILL_JOURNAL as JOURNAL
from taskzilla_sleep.memory.meta_keys import LAST_DISTILL
from taskzilla_sleep.memory.vector_meta import pattern_metadata
from taskzilla_sleep.night.steps.base import NoUsableAnswers, StepContext
from taskzilla_sleep.night.steps.distill.plan import DistillPlan, digest, from_journal, to_journal
from taskzilla_sleep.stores.ports import EpisodeUpdate

log = structlog.get_logger(__name__)

MARK_BATCH = 2000


def write(ctx: StepContext, plan: DistillPlan) -> dict[str, int]:
    if not plan.resumed:
        ctx.graph.set_meta(JOURNAL.format(team=ctx.team), json.dumps(to_journal(plan)))
        crashpoint("distill.after_journal")
    written: list[Pattern] = []
    try:
        _write_patterns(ctx, plan, written)
    finally:
        # Cross-store order: the graph first (one atomic write per pattern), then the vectors of
        # what was written, in one call (also when the step is left between two patterns).
        live = [p for p in written if p.status in PATTERN_LIVE]
        if live:
            ctx.vectors.upsert(
                ctx.team,
                "patterns",
                [p.id for p in live],
                [p.statement for p in live],
                [pattern_metadata(p) for p in live],
            )
    for i in range(0, len(plan.marks), MARK_BATCH):
        ctx.check_stop()
        ctx.graph.update_episodes(plan.marks[i : i + MARK_BATCH])
    if plan.lookback is None:
        _record_deferral(ctx, plan)
    crashpoint("distill.before_watermark")
    # The end, in one write: when this distill ran (the watchdog's cooldown counts from it) and the
    # journal closed. Before it, a crash leaves the journal, which the next run finishes.
    ctx.graph.finish_journal(LAST_DISTILL.format(team=ctx.team), str(to_ms(plan.now)), JOURNAL.format(team=ctx.team))
    if plan.failure:
        raise NoUsableAnswers(plan.failure, plan.counts())
    return plan.counts()


def _record_deferral(ctx: StepContext, plan: DistillPlan) -> None:
    """What this full-window distill left for later, for the watchdog (``watchdog.take_deferred``).
    Written before the journal closes, so a crash in between rewrites it from the journal."""
    left = plan.deferral()
    value = "" if left is None else json.dumps({"groups": left.groups, "reason": left.reason})
    key = DEFERRED.format(team=ctx.team)
    if (ctx.graph.get_meta(key) or "") != value:
        ctx.graph.set_meta(key, value)


def resume(ctx: StepContext) -> dict[str, int] | None:
    """Finish the apply of a distill a crash (or a shutdown) left half-done, from its journal.

    Its decisions were taken from the stores as they were before its first write; taking them again
    from what the crash left would give other answers. A change to a pattern that somebody else
    has changed since (a person resolving a contradiction) is skipped, not overwritten."""
    key = JOURNAL.format(team=ctx.team)
    raw = ctx.graph.get_meta(key)
    if not raw:
        return None
    try:
        plan = from_journal(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        # A journal this version cannot read must not fail every later night: set it aside, say so.
        log.error("distill_journal_unreadable", team=ctx.team, error=str(exc)[:300], kept_as=f"{key}:unreadable")
        ctx.graph.set_meta(f"{key}:unreadable", raw)
        ctx.graph.set_meta(key, "")
        return None
    current = {x.id: digest(x) for x in ctx.graph.patterns_by_id([c.pattern.id for c in plan.changes])}
    kept = [c for c in plan.changes if current.get(c.pattern.id) == c.before_digest]
    for c in plan.changes:
        if c not in kept and current[c.pattern.id] != digest(c.pattern):
            log.warning("distill_resume_skipped", pattern_id=c.pattern.id, reason="changed since the plan")
    plan.changes = kept
    log.info("distill_resumed", team=ctx.team, planned_at=plan.now.isoformat(), changes=len(kept))
    try:
        return write(ctx, plan)
    except NoUsableAnswers:
        return plan.counts()  # the interrupted run already reported its failure


def _write_patterns(ctx: StepContext, plan: DistillPlan, written: list[Pattern]) -> None:
    for c in plan.changes:
        ctx.check_stop()
        pat = c.pattern
        updates = {
            i: EpisodeUpdate(
                id=i, status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=plan.now, absorbed_by=pat.id
            )
            for i in c.absorb
        }
        updates.update(
            {
                i: EpisodeUpdate(id=i, status=EpisodeStatus.RAW, schema_absorbed=0, absorbed_at=None, absorbed_by=None)
                for i in c.unabsorb
            }
        )
        evidence = [updates.pop(i, EpisodeUpdate(id=i)) for i in pat.evidence_ids]
        ctx.graph.write_pattern(pat, c.subject_keys, evidence + list(updates.values()))
        written.append(pat)
        crashpoint("distill.after_pattern_graph")
