"""03:15 reflect: every pattern created or changed since the last reflect, against older beliefs.

Neighbours come from the vectors (most similar live patterns) and the graph (patterns about the
same entities). The model classifies each (new, old) pair: same -> merge (older id kept, evidence
summed), refines/compatible -> link, unrelated -> remembered (per prompt: never asked again),
supersedes/contradicts -> a Contradiction with both beliefs kept. Its kind comes from
``policies.contradiction_kind`` (the verdict, the dates and the people): an ``update`` (the team
changed its practice) contests the old belief and keeps the new one usable, awaiting a person's
confirmation; a ``disagreement`` contests both. Nothing is overwritten; pinned facts are never
merged or contested away.

A comparison whose answer was unusable (invalid even after the corrective retry) is not a verdict:
the pattern is compared again at the next reflect, at most ``reflect.max_attempts`` times in all
(then given up and reported), and a reflect in which no comparison got a usable answer is a failed
step, like a 5xx.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import structlog

from taskzilla_sleep.beliefs import injection, slots
from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.llm.base import CONFLICTS, PatternView, ReflectRequest, Unanswered, Verdict
from taskzilla_sleep.models import (
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
from taskzilla_sleep.policies import (
    Ledger,
    Span,
    contradiction_id,
    contradiction_kind,
    disagree,
    is_stale,
    ledger_confidence,
)
from taskzilla_sleep.steps.base import NoUsableAnswers, StepContext
from taskzilla_sleep.stores.ports import EpisodeUpdate, LinkRelation, PatternUpdate
from taskzilla_sleep.text import one_line

log = structlog.get_logger(__name__)

WATERMARK = "reflect_watermark:{team}"
UNRELATED = "UNRELATED_TO"


@dataclass
class Merge:
    keep: Pattern
    drop: Pattern
    moved: list[str]  # episodes absorbed by ``drop`` that now point at ``keep``


@dataclass
class ReflectPlan:
    team: str
    step: str = "reflect"
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
    statements: dict[str, str] = field(default_factory=dict)
    unrelated: list[tuple[str, str]] = field(default_factory=list)  # (new, old) the model called unrelated
    prompt_id: str = ""

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
        }

    def empty(self) -> bool:
        return not (self.merges or self.links or self.contradictions)


def plan(ctx: StepContext) -> ReflectPlan:
    p = ReflectPlan(team=ctx.team)
    raw = ctx.graph.get_meta(WATERMARK.format(team=ctx.team))
    watermark = from_ms(int(raw)) if raw else None
    patterns = {x.id: x for x in ctx.graph.patterns(ctx.team)} | ctx.pending_patterns
    live = {i: x for i, x in patterns.items() if x.status in PATTERN_LIVE}
    p.statements = {i: x.statement for i, x in patterns.items()}
    p.stale = [x for x in live.values() if is_stale(x, ctx.now, timedelta(days=ctx.settings.reflect.stale_after_days))]
    retry = ctx.settings.reflect.max_attempts
    changed = sorted(
        (x for x in live.values() if watermark is None or x.updated_at > watermark or 0 < x.reflect_attempts < retry),
        key=lambda x: (x.first_seen, x.id),
    )
    if not changed or len(live) < 2:
        return p

    vecs = ctx.vectors_of("patterns", sorted(live))
    ids = [i for i in sorted(live) if i in vecs]
    matrix = np.stack([vecs[i] for i in ids])
    prompt = ctx.llm.prompt_ids["reflect"]
    # A verdict of "unrelated" is remembered per prompt: a new prompt may see what the old one missed.
    decided = {(x.a, x.b) for x in ctx.graph.pattern_links(ctx.team) if x.relation != UNRELATED or x.prompt == prompt}
    decided |= {(c.new_pattern_id, c.old_pattern_id) for c in ctx.graph.contradictions(ctx.team)}
    decided |= {(b, a) for a, b in decided}

    pairs: list[tuple[Pattern, Pattern, float]] = []
    origin: list[str] = []  # the changed pattern each pair was found for
    seen: set[tuple[str, str]] = set()
    for new in changed:
        if new.id not in vecs:
            continue
        sims = matrix @ vecs[new.id]
        ranked = np.argsort(-sims, kind="stable")  # equal similarities in id order, not quicksort's whim
        order = [ids[k] for k in ranked if ids[k] != new.id][: ctx.settings.reflect.neighbours]
        neighbours = order + [i for i in ctx.graph.entity_neighbours(new.id, sorted(PATTERN_LIVE)) if i not in order]
        for oid in neighbours:
            old = live.get(oid)
            if old is None or oid not in vecs:
                continue
            if (old.first_seen, old.id) > (new.first_seen, new.id):
                new_, old_ = old, new  # the pair is always (newer, older)
            else:
                new_, old_ = new, old
            key = (new_.id, old_.id)
            sim = float(vecs[new_.id] @ vecs[old_.id])
            if key in seen or key in decided or sim < ctx.settings.reflect.min_similarity:
                continue
            seen.add(key)
            pairs.append((new_, old_, sim))
            origin.append(new.id)

    # The people and messages behind each belief compared: reflect shows them to the model, and the
    # kind of a contradiction (an update or a disagreement) is decided from them.
    compared = {x.id: x for n, o, _ in pairs for x in (n, o)}
    evidence = _evidence(ctx, compared.values())
    spans = {i: Span.of(x, evidence[i]) for i, x in compared.items()}
    views = {i: _view(x, evidence[i], spans[i]) for i, x in compared.items()}
    requests = [
        ReflectRequest(team=ctx.team, new=views[n.id], old=views[o.id], similarity=round(s, 4)) for n, o, s in pairs
    ]
    verdicts = ctx.llm.classify_many(requests)
    p.compared = len(pairs)
    p.prompt_id = prompt
    gone: set[str] = set()
    absorbed = {e.id: e for e in ctx.graph.episodes_by_status(ctx.team, [EpisodeStatus.ABSORBED.value])}
    failed: set[str] = set()
    for (new, old, sim), why, verdict in zip(pairs, origin, verdicts, strict=True):
        answer = guard(verdict, new, old, sim, ctx.settings.reflect.conflict_similarity)
        if isinstance(answer, Unanswered):
            p.unanswered += 1
            failed.add(why)
            continue
        if new.id in gone or old.id in gone:
            continue
        p.guarded += answer is not verdict
        _decide(ctx, p, new, old, answer, gone, absorbed, spans)
    for x in changed:
        attempts = x.reflect_attempts + 1 if x.id in failed else 0
        p.given_up += x.id in failed and attempts >= retry
        if attempts != x.reflect_attempts:
            p.attempts.append(PatternUpdate(id=x.id, reflect_attempts=attempts))
    if pairs and p.unanswered == len(pairs):
        last = next(v for v in reversed(verdicts) if isinstance(v, Unanswered))
        p.failure = (
            f"reflect {ctx.team}: none of {len(pairs)} comparison(s) got a usable answer from the model "
            f"(last: {last.reason[:200]})"
        )
    return p


def _decide(
    ctx: StepContext,
    p: ReflectPlan,
    new: Pattern,
    old: Pattern,
    verdict: Verdict,
    gone: set[str],
    absorbed: dict[str, Episode],
    spans: dict[str, Span],
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
                "updated_at": ctx.now,
            }
        )
        moved = sorted(i for i, e in absorbed.items() if e.absorbed_by == new.id)
        drop = new.model_copy(
            update={
                "status": PatternStatus.RETIRED,
                "superseded_by": old.id,
                "archived_at": ctx.now,
                "archived_by": "reflect",
                "archived_reason": f"merged into {old.id} (same belief)",
                "valid_to": ctx.now,
                "updated_at": ctx.now,
            }
        )
        p.merges.append(Merge(keep, drop, moved))
        gone.add(new.id)
    elif rel == "same" or rel in ("refines", "compatible"):
        p.links.append((new.id, "refines" if rel == "refines" else "compatible", old.id))
    elif rel == "unrelated":
        p.unrelated.append((new.id, old.id))
    else:
        kind = contradiction_kind(rel, spans[old.id], spans[new.id])
        c = Contradiction(
            id=contradiction_id(ctx.team, old.id, new.id),
            team=ctx.team,
            old_pattern_id=old.id,
            new_pattern_id=new.id,
            kind=kind,
            opened_at=ctx.now,
            reason=_reason(verdict.reason),
            prompt_id=p.prompt_id,
        )
        p.contradictions.append((c, old, new))


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


def _after_counter(old: Pattern, new: Pattern) -> float:
    """The old belief's confidence once the new one's support counts against it (same ledger rule as distill)."""
    led = Ledger(
        support=old.support_count,
        counter=old.counter_count + new.support_count,
        authors=old.distinct_authors,
        channels=old.distinct_channels,
        llm_confidence=old.llm_confidence,
    )
    return ledger_confidence(led)


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


def _reason(text: str) -> str:
    """A model's reason is shown to people in alerts: never one that reads as an order or holds a secret."""
    reason = one_line(text, 300)
    return reason if injection(reason) is None else "(the model's reason was withheld: it read as an instruction)"


def apply(ctx: StepContext, plan: ReflectPlan) -> dict[str, int]:
    for m in plan.merges:
        ctx.check_stop()
        rows = [EpisodeUpdate(id=i, absorbed_by=m.keep.id) for i in m.moved]
        # Graph first (one atomic write: both patterns, the MERGED_INTO link, the tombstone, the
        # re-pointed episodes), then the dropped pattern's vector leaves Chroma.
        ctx.graph.merge_patterns(m.keep, m.drop, rows, ctx.now)
        crashpoint("reflect.after_merge_graph")
        ctx.vectors.delete(ctx.team, "patterns", [m.drop.id])
    for a, rel, b in plan.links:
        ctx.graph.link_patterns(a, b, rel)
    # Remembered so that an unchanged pair is not asked again (an idempotent write: a rerun repeats it).
    ctx.graph.link_unrelated(plan.unrelated, plan.prompt_id)
    for c, old, new in plan.contradictions:
        # One atomic write: the contradiction, both beliefs contested, and the new belief's support
        # recorded as counter-evidence in the old one's ledger (only when the contradiction is new).
        ctx.graph.open_contradiction(c, counter=new.support_count, old_confidence=_after_counter(old, new))
        crashpoint("reflect.after_contradiction")
        log.warning("contradiction_opened", contradiction_id=c.id, old=old.id, new=new.id, team=ctx.team)
    ctx.notes.setdefault("stale", []).extend(f"{x.id}: {one_line(x.statement, 80)}" for x in plan.stale)
    crashpoint("reflect.before_watermark")
    # The comparisons to ask again and the watermark, in one write.
    ctx.graph.update_patterns_and_meta(plan.attempts, WATERMARK.format(team=ctx.team), str(to_ms(ctx.now)))
    if plan.failure:
        raise NoUsableAnswers(plan.failure, plan.counts())
    return plan.counts()
