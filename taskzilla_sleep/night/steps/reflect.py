"""03:15 reflect: every pattern created or changed since the last reflect, against older beliefs.

Read: neighbours come from the vectors (most similar live patterns) and the graph (patterns about
the same entities); the model classifies each (new, old) pair. Decide: same -> merge (older id
kept, evidence summed), refines/compatible -> link, unrelated -> remembered (per prompt: never
asked again), supersedes/contradicts -> a Contradiction with both beliefs kept. Its kind comes from
``policies.contradiction_kind`` (the verdict, the dates and the people): an ``update`` (the team
changed its practice) contests the old belief and keeps the new one usable, awaiting a person's
confirmation; a ``disagreement`` contests both. Nothing is overwritten; pinned facts are never
merged or contested away.

Budget and window (``budget.Gate``): before each round of calls, its estimate is let through or not;
the pairs not asked are left untouched and their changed patterns recorded (``DEFERRED``, written
before the watermark moves), so the next reflect selects them again, first, and asks what is still
undecided; nothing is merged or contested without its verdict.

A comparison whose answer was unusable (invalid even after the corrective retry) is not a verdict:
the pattern is compared again at the next reflect, at most ``reflect.max_attempts`` times in all
(then given up and reported), and a reflect in which no comparison got a usable answer is a failed
step, like a 5xx.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import structlog

from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import (
    PATTERN_LIVE,
    Contradiction,
    ContradictionKind,
    Episode,
    EpisodeStatus,
    Pattern,
    PatternStatus,
    Provenance,
    from_ms,
    to_ms,
)
from taskzilla_sleep.core.settings import ReflectSettings, Settings
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.llm.base import CONFLICTS, PatternView, ReflectRequest, Unanswered, Verdict, shown_reason
from taskzilla_sleep.memory.meta_keys import REFLECT_DEFERRED as DEFERRED
from taskzilla_sleep.memory.meta_keys import REFLECT_WATERMARK as WATERMARK
from taskzilla_sleep.night import budget
from taskzilla_sleep.night.budget import Deferral, Estimate, Reason
from taskzilla_sleep.night.steps.base import NoUsableAnswers, PlanBase, StepContext, Vector
from taskzilla_sleep.rules.beliefs import slots
from taskzilla_sleep.rules.policies import (
    Ledger,
    Span,
    contradiction_id,
    contradiction_kind,
    disagree,
    is_stale,
    ledger_confidence,
)
from taskzilla_sleep.stores.ports import EpisodeUpdate, LinkRelation, PatternUpdate

log = structlog.get_logger(__name__)

UNRELATED = "UNRELATED_TO"


@dataclass(frozen=True)
class Comparison:
    """A (newer, older) pair of live beliefs, and what the model answered about it."""

    new: Pattern
    old: Pattern
    similarity: float
    origin: str  # the changed pattern the pair was found for
    verdict: Verdict | Unanswered


@dataclass(frozen=True)
class ReflectInputs:
    team: str
    live: Mapping[str, Pattern]
    changed: tuple[Pattern, ...]  # created or changed since the last reflect, or to be asked again
    comparisons: tuple[Comparison, ...]
    spans: Mapping[str, Span]  # of every compared pattern: when and by whom it was stated
    absorbed: Mapping[str, Episode]  # the team's absorbed episodes (a merge re-points them)
    prompt_id: str
    held: tuple[str, ...] = ()  # DEFERRED as read: patterns a budgeted reflect left
    deferred: tuple[str, ...] = ()  # changed patterns with a comparison not asked (budget or window)
    deferred_pairs: int = 0
    deferred_reason: Reason | None = None
    estimate: Estimate = Estimate()  # what asking every pair worth asking takes (before the gate)


@dataclass
class Merge:
    keep: Pattern
    drop: Pattern
    moved: list[str]  # episodes absorbed by ``drop`` that now point at ``keep``


@dataclass
class ReflectPlan(PlanBase):
    team: str
    merges: list[Merge] = field(default_factory=list)
    links: list[tuple[str, LinkRelation, str]] = field(default_factory=list)  # (new, relation, old)
    contradictions: list[tuple[Contradiction, Pattern, Pattern]] = field(default_factory=list)  # (c, old, new)
    stale: list[Pattern] = field(default_factory=list)
    compared: int = 0
    unanswered: int = 0
    guarded: int = 0  # pairs the slot guard made contradictions whatever the model answered
    given_up: int = 0  # patterns whose comparison got no usable answer in reflect.max_attempts reflects
    attempts: list[PatternUpdate] = field(default_factory=list)  # reflect_attempts to record
    failure: str | None = None  # no comparison got a usable answer: the step fails after applying
    unrelated: list[tuple[str, str]] = field(default_factory=list)  # (new, old) the model called unrelated
    prompt_id: str = ""
    held: tuple[str, ...] = ()  # see ReflectInputs
    deferred: tuple[str, ...] = ()
    deferred_pairs: int = 0
    deferred_reason: Reason | None = None
    estimate: Estimate = field(default_factory=Estimate)

    def lines(self) -> list[str]:
        out = [
            f"= merge {m.drop.id} into {m.keep.id} (evidence {m.keep.support_count}) {one_line(m.keep.statement)}"
            for m in self.merges
        ]
        out += [f"& link {a} {rel} {b}" for a, rel, b in self.links]
        for c, old, new in self.contradictions:
            if c.kind is ContradictionKind.UPDATE:
                out.append(f"! update {c.id}: both kept, the old one contested, the new one awaiting confirmation")
            else:
                out.append(f"! disagreement {c.id}: both kept, both contested")
            out.append(f"    old {old.id} ({old.support_count} episodes) {one_line(old.statement)}")
            out.append(f"    new {new.id} ({new.support_count} episodes) {one_line(new.statement)}")
        out += [
            f"? stale (listed, not removed) {p.id} last seen {p.last_seen.date()} {one_line(p.statement)}"
            for p in self.stale
        ]
        if self.unanswered:
            out.append(f"? {self.unanswered} comparison(s) got no usable answer ({self.given_up} given up)")
        if self.estimate.groups:
            out.append(f"= {self.team} {self.estimate.line().replace('group(s)', 'comparison(s)', 1)}")
        left = self.deferral()
        if left is not None:
            out.append(f"… {left.line()}")
        return out

    def counts(self) -> dict[str, int]:
        return {
            "compared": self.compared,
            "merges": len(self.merges),
            "links": len(self.links),
            "contradictions": len(self.contradictions),
            "updates": sum(c.kind is ContradictionKind.UPDATE for c, _, _ in self.contradictions),
            "unrelated": len(self.unrelated),
            "stale": len(self.stale),
            "unanswered": self.unanswered,
            "given_up": self.given_up,
            "guarded": self.guarded,
            "deferred_groups": self.deferred_pairs,  # comparisons not asked (budget or window)
            **self.estimate.counts(),
        }

    def empty(self) -> bool:
        return not (self.merges or self.links or self.contradictions)

    def notes(self) -> dict[str, list[str]]:
        return {"stale": [f"{x.id}: {one_line(x.statement, 80)}" for x in self.stale]}

    def deferral(self) -> Deferral | None:
        if not self.deferred_pairs:
            return None
        return Deferral(self.team, self.deferred_pairs, self.deferred_reason or "budget", "comparison")

    def estimate_cost(self) -> float | None:
        return self.estimate.cost_usd


# -- read -----------------------------------------------------------------------------------------


def read(ctx: StepContext) -> ReflectInputs:
    raw = ctx.graph.get_meta(WATERMARK.format(team=ctx.team))
    watermark = from_ms(int(raw)) if raw else None
    patterns = {x.id: x for x in ctx.graph.patterns(ctx.team)} | ctx.pending_patterns
    live = {i: x for i, x in patterns.items() if x.status in PATTERN_LIVE}
    retry = ctx.settings.reflect.max_attempts
    held = _held(ctx.graph.get_meta(DEFERRED.format(team=ctx.team)))
    changed = sorted(
        (
            x
            for x in live.values()
            if watermark is None or x.updated_at > watermark or 0 < x.reflect_attempts < retry or x.id in held
        ),
        key=lambda x: (x.id not in held, x.first_seen, x.id),  # what a budget left is taken first
    )
    prompt = ctx.llm.prompt_ids["reflect"]
    inputs = ReflectInputs(ctx.team, live, tuple(changed), (), {}, {}, prompt, held=held)
    if not changed or len(live) < 2:
        return inputs

    vecs = ctx.vectors_of("patterns", sorted(live))
    # A verdict of "unrelated" is remembered per prompt: a new prompt may see what the old one missed.
    decided = {(x.a, x.b) for x in ctx.graph.pattern_links(ctx.team) if x.relation != UNRELATED or x.prompt == prompt}
    decided |= {(c.new_pattern_id, c.old_pattern_id) for c in ctx.graph.contradictions(ctx.team)}
    decided |= {(b, a) for a, b in decided}
    neighbours = {x.id: ctx.graph.entity_neighbours(x.id, sorted(PATTERN_LIVE)) for x in changed if x.id in vecs}
    pairs = candidate_pairs(changed, live, vecs, frozenset(decided), neighbours, ctx.settings.reflect)

    # The people and messages behind each belief compared: reflect shows them to the model, and the
    # kind of a contradiction (an update or a disagreement) is decided from them.
    compared = {x.id: x for n, o, _, _ in pairs for x in (n, o)}
    evidence = _evidence(ctx, compared.values())
    spans = {i: Span.of(x, evidence[i]) for i, x in compared.items()}
    views = {i: _view(x, evidence[i], spans[i]) for i, x in compared.items()}
    requests = [
        ReflectRequest(team=ctx.team, new=views[n.id], old=views[o.id], similarity=round(s, 4)) for n, o, s, _ in pairs
    ]
    parts = [budget.estimate_reflect_batch([requests[i] for i in b]) for b in budget.reflect_batches(requests)]
    pending = budget.total(len(requests), parts, ctx.settings.llm.model) if requests else Estimate()
    verdicts, reason = _ask(ctx, requests)
    absorbed = {e.id: e for e in ctx.graph.episodes_by_status(ctx.team, [EpisodeStatus.ABSORBED.value])}
    comparisons = tuple(
        Comparison(n, o, s, why, verdicts[i]) for i, (n, o, s, why) in enumerate(pairs) if i in verdicts
    )
    left = [why for i, (_, _, _, why) in enumerate(pairs) if i not in verdicts]
    return ReflectInputs(
        ctx.team,
        live,
        tuple(changed),
        comparisons,
        spans,
        absorbed,
        prompt,
        held=held,
        deferred=tuple(dict.fromkeys(left)),
        deferred_pairs=len(left),
        deferred_reason=reason if left else None,
        estimate=pending,
    )


def _held(raw: str | None) -> tuple[str, ...]:
    """DEFERRED's pattern ids (an unreadable value is an empty list: the watermark's selection stands)."""
    try:
        ids = json.loads(raw) if raw else []
    except ValueError:
        log.warning("reflect_deferred_unreadable", value=raw[:100] if raw else raw)
        return ()
    return tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()


def _ask(ctx: StepContext, requests: Sequence[ReflectRequest]) -> tuple[dict[int, Verdict | Unanswered], Reason | None]:
    """The verdicts by index into ``requests``, and why the rest were not asked (None: all were).

    Asked as :func:`budget.ask_in_rounds` asks, in pair order (what an earlier night deferred first)."""
    return budget.ask_in_rounds(
        ctx.gate,
        ctx.team,
        requests,
        ctx.llm.classify_many,
        batches=budget.reflect_batches(requests),
        cost=budget.estimate_reflect_batch,
        width=ctx.settings.llm.max_concurrency,
    )


def candidate_pairs(
    changed: Sequence[Pattern],
    live: Mapping[str, Pattern],
    vecs: Mapping[str, Vector],
    decided: frozenset[tuple[str, str]],
    neighbours: Mapping[str, Sequence[str]],
    s: ReflectSettings,
) -> list[tuple[Pattern, Pattern, float, str]]:
    """(newer, older, similarity, the changed pattern it was found for) for every pair worth asking:
    the changed pattern's nearest live neighbours and those about the same entities, not decided yet."""
    ids = [i for i in sorted(live) if i in vecs]
    matrix = np.stack([vecs[i] for i in ids])
    pairs: list[tuple[Pattern, Pattern, float, str]] = []
    seen: set[tuple[str, str]] = set()
    for new in changed:
        if new.id not in vecs:
            continue
        sims = matrix @ vecs[new.id]
        ranked = np.argsort(-sims, kind="stable")  # equal similarities in id order, not quicksort's whim
        order = [ids[k] for k in ranked if ids[k] != new.id][: s.neighbours]
        for oid in order + [i for i in neighbours.get(new.id, ()) if i not in order]:
            old = live.get(oid)
            if old is None or oid not in vecs:
                continue
            newer, older = (old, new) if (old.first_seen, old.id) > (new.first_seen, new.id) else (new, old)
            key = (newer.id, older.id)
            sim = float(vecs[newer.id] @ vecs[older.id])
            if key in seen or key in decided or sim < s.min_similarity:
                continue
            seen.add(key)
            pairs.append((newer, older, sim, new.id))
    return pairs


def _evidence(ctx: StepContext, patterns: Iterable[Pattern]) -> dict[str, list[Episode]]:
    """Each pattern's supporting episodes still in the graph (retired ones keep author and time)."""
    pats = list(patterns)
    found = {e.id: e for e in ctx.graph.get_episodes(sorted({i for x in pats for i in x.evidence_ids}))}
    return {x.id: sorted((found[i] for i in x.evidence_ids if i in found), key=lambda e: (e.ts, e.id)) for x in pats}


def _view(x: Pattern, evidence: Sequence[Episode], span: Span) -> PatternView:
    said = [e for e in evidence if e.provenance is not Provenance.BOT and e.text.strip()]
    examples = [said[0], said[-1]] if len(said) > 1 else said  # the first and the latest statement
    names = Counter(e.author for e in evidence if e.provenance is not Provenance.BOT)
    return PatternView(
        id=x.id,
        statement=x.statement,
        kind=x.kind,
        first_seen=span.first,
        last_seen=span.last,
        support=x.support_count,
        authors=tuple(sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))),
        subjects=tuple(x.subjects),
        examples=tuple(one_line(e.text, 200) for e in examples),
        replaces=x.replaces,
    )


# -- decide ---------------------------------------------------------------------------------------


def decide(inputs: ReflectInputs, settings: Settings, now: datetime) -> ReflectPlan:
    s = settings.reflect
    plan = ReflectPlan(
        team=inputs.team,
        prompt_id=inputs.prompt_id,
        held=inputs.held,
        deferred=inputs.deferred,
        deferred_pairs=inputs.deferred_pairs,
        deferred_reason=inputs.deferred_reason,
        estimate=inputs.estimate,
    )
    plan.stale = [x for x in inputs.live.values() if is_stale(x, now, timedelta(days=s.stale_after_days))]
    if not inputs.comparisons and (not inputs.changed or len(inputs.live) < 2):
        return plan
    plan.compared = len(inputs.comparisons)
    gone: set[str] = set()
    failed: set[str] = set()
    for c in inputs.comparisons:
        answer = guard(c.verdict, c.new, c.old, c.similarity, s.conflict_similarity)
        if isinstance(answer, Unanswered):
            plan.unanswered += 1
            failed.add(c.origin)
            continue
        if c.new.id in gone or c.old.id in gone:
            continue
        plan.guarded += answer is not c.verdict
        _judge(plan, inputs, now, c.new, c.old, answer, gone)
    for x in inputs.changed:
        attempts = x.reflect_attempts + 1 if x.id in failed else 0
        plan.given_up += x.id in failed and attempts >= s.max_attempts
        if attempts != x.reflect_attempts:
            plan.attempts.append(PatternUpdate(id=x.id, reflect_attempts=attempts))
    if inputs.comparisons and plan.unanswered == len(inputs.comparisons):
        last = next(c.verdict for c in reversed(inputs.comparisons) if isinstance(c.verdict, Unanswered))
        assert isinstance(last, Unanswered)
        plan.failure = (
            f"reflect {inputs.team}: none of {len(inputs.comparisons)} comparison(s) got a usable answer from "
            f"the model (last: {last.reason[:200]})"
        )
    return plan


def _judge(
    plan: ReflectPlan,
    inputs: ReflectInputs,
    now: datetime,
    new: Pattern,
    old: Pattern,
    verdict: Verdict,
    gone: set[str],
) -> None:
    rel = verdict.relation
    if rel == "same" and not (new.pinned or old.pinned) and PatternStatus.CONTESTED not in (new.status, old.status):
        both = sorted(set(old.evidence_ids) | set(new.evidence_ids))
        keep = old.model_copy(
            update={
                "evidence_ids": both,
                "support_count": len(both),
                "first_seen": min(old.first_seen, new.first_seen),
                "last_seen": max(old.last_seen, new.last_seen),
                "updated_at": now,
            }
        )
        moved = sorted(i for i, e in inputs.absorbed.items() if e.absorbed_by == new.id)
        drop = new.model_copy(
            update={
                "status": PatternStatus.RETIRED,
                "superseded_by": old.id,
                "archived_at": now,
                "archived_by": "reflect",
                "archived_reason": f"merged into {old.id} (same belief)",
                "valid_to": now,
                "updated_at": now,
            }
        )
        plan.merges.append(Merge(keep, drop, moved))
        gone.add(new.id)
    elif rel == "same" or rel in ("refines", "compatible"):
        plan.links.append((new.id, "refines" if rel == "refines" else "compatible", old.id))
    elif rel == "unrelated":
        plan.unrelated.append((new.id, old.id))
    else:
        kind = contradiction_kind(rel, inputs.spans[old.id], inputs.spans[new.id])
        c = Contradiction(
            id=contradiction_id(inputs.team, old.id, new.id),
            team=inputs.team,
            old_pattern_id=old.id,
            new_pattern_id=new.id,
            kind=kind,
            opened_at=now,
            reason=shown_reason(verdict.reason),  # shown to people in alerts, whatever the provider
            prompt_id=plan.prompt_id,
        )
        plan.contradictions.append((c, old, new))


def guard(
    verdict: Verdict | Unanswered, new: Pattern, old: Pattern, similarity: float, topic: float
) -> Verdict | Unanswered:
    """The verdict the product acts on. Two beliefs of one topic (similarity ≥ ``topic``) that
    disagree on a slot (another value, tool, or the opposite polarity) conflict whatever the
    provider said: a provider may add a conflict, never turn one the guard found into "same" or
    "compatible". (Whether it is an update or a disagreement is contradiction_kind's, after.)"""
    if similarity < topic or new.pinned and old.pinned:
        return verdict
    slot = disagree(slots(new.statement, new.subjects), slots(old.statement, old.subjects), similarity)
    if not slot or (isinstance(verdict, Verdict) and verdict.relation in CONFLICTS):
        return verdict
    said = "no usable answer" if isinstance(verdict, Unanswered) else f"the model said {verdict.relation}"
    return Verdict(relation="contradicts", reason=f"the two statements disagree on the {slot} ({said})")


def after_counter(old: Pattern, new: Pattern) -> float:
    """The old belief's confidence once the new one's support counts against it (same ledger rule as distill)."""
    ledger = Ledger(
        support=old.support_count,
        counter=old.counter_count + new.support_count,
        authors=old.distinct_authors,
        channels=old.distinct_channels,
        llm_confidence=old.llm_confidence,
    )
    return ledger_confidence(ledger)


# -- write ----------------------------------------------------------------------------------------


def write(ctx: StepContext, plan: ReflectPlan) -> dict[str, int]:
    for m in plan.merges:
        ctx.check_stop()
        moved = [EpisodeUpdate(id=i, absorbed_by=m.keep.id) for i in m.moved]
        # Graph first (one atomic write: both patterns, the MERGED_INTO link, the tombstone, the
        # re-pointed episodes), then the dropped pattern's vector leaves Chroma.
        ctx.graph.merge_patterns(m.keep, m.drop, moved, ctx.now)
        crashpoint("reflect.after_merge_graph")
        ctx.vectors.delete(ctx.team, "patterns", [m.drop.id])
    for a, rel, b in plan.links:
        ctx.graph.link_patterns(a, b, rel)
    # Remembered so that an unchanged pair is not asked again (an idempotent write: a rerun repeats it).
    ctx.graph.link_unrelated(plan.unrelated, plan.prompt_id)
    for c, old, new in plan.contradictions:
        # One atomic write: the contradiction, both beliefs contested, and the new belief's support
        # recorded as counter-evidence in the old one's ledger (only when the contradiction is new).
        ctx.graph.open_contradiction(c, counter=new.support_count, old_confidence=after_counter(old, new))
        crashpoint("reflect.after_contradiction")
        log.warning("contradiction_opened", contradiction_id=c.id, old=old.id, new=new.id, team=ctx.team)
    if plan.held or plan.deferred:
        # Before the watermark moves: a crash in between asks again what this reflect asked, never
        # forgets what it did not.
        ctx.graph.set_meta(DEFERRED.format(team=ctx.team), json.dumps(list(plan.deferred)) if plan.deferred else "")
    crashpoint("reflect.before_watermark")
    # The comparisons to ask again and the watermark, in one write.
    ctx.graph.update_patterns_and_meta(plan.attempts, WATERMARK.format(team=ctx.team), str(to_ms(ctx.now)))
    if plan.failure:
        raise NoUsableAnswers(plan.failure, plan.counts())
    return plan.counts()
