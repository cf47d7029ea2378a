"""03:10 distill: raw episodes -> patterns with a ledger-based confidence.

Read: the raw episodes of the window (``distill.window_days`` by ``ts``) and every raw episode that
arrived since the last nightly distill, whatever its ``ts`` says (a bot's backlog, an import, a
connector catching up). A group goes to the model only when it holds something new: for the
night, an episode that no nightly distill has taken into account yet (``distilled_at`` unset); for
the watchdog, an episode ingested since the last distill of any kind.

Plan: group, ask, match each answer against existing patterns (evidence overlap or statement
similarity -> bump instead of duplicate), rescore every live pattern from its ledger, and mark
what the night took into account. A group whose answer was unusable (invalid even after the
corrective retry) keeps its new episodes pending: the next night asks again, at most
``distill.max_attempts`` times in all, then gives up and reports it. A distill in which no question
got a usable answer is a failed step (like a 5xx), after recording the attempt.

Apply, write-ahead: the whole plan first goes to a journal in the graph (one write); then one graph
write per pattern (pattern + evidence links + absorption), the vectors of the patterns written (one
call), the episodes' marks, and last, in one write, the time of this distill with the journal's
end. A crash anywhere in between is finished from the journal when the next run starts (before any
step plans): the rerun applies the first attempt's decisions instead of re-deciding from stores the
crash left half-written, so it ends where an uninterrupted run ends.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from taskzilla_sleep.beliefs import Kind, Slots, injection, is_belief, slots, statement_kind, topics
from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.llm.base import DistillRequest, EpisodeView, PatternDraft, Unanswered
from taskzilla_sleep.models import (
    PATTERN_LIVE,
    Episode,
    EpisodeStatus,
    Pattern,
    PatternStatus,
    from_ms,
    to_ms,
)
from taskzilla_sleep.policies import (
    STRONG_SIMILARITY,
    Candidate,
    Ledger,
    disagree,
    distinct_texts,
    group_episodes,
    is_learnable,
    ledger_confidence,
    main_channel,
    pattern_id,
    status_for,
    topic_for,
)
from taskzilla_sleep.steps.base import NoUsableAnswers, StepContext
from taskzilla_sleep.stores.ports import EpisodeUpdate, GraphStore, Mention
from taskzilla_sleep.text import one_line

log = structlog.get_logger(__name__)

LAST_DISTILL = "last_distill_at:{team}"  # nightly or watchdog: the watchdog's cooldown counts from it
JOURNAL = "distill_journal:{team}"  # the plan being applied ("" when none is)
# Written by versions whose nightly "new" meant "timestamped after the last night": an episode stored
# and timestamped before it was distilled then. Read only, to carry such stores over.
LEGACY_WATERMARK = "distill_watermark:{team}"


@dataclass
class PatternChange:
    pattern: Pattern
    action: str  # "add" | "bump" | "rescore"
    subject_keys: list[str]
    absorb: list[str]  # episode ids to absorb into this pattern
    unabsorb: list[str]  # episode ids to give back (pattern fell below the floor)
    before: Pattern | None = None
    # A digest of the pattern as the plan read it (None: a new pattern). Finishing a journal after a
    # crash applies a change only to a pattern still in that state: one the first attempt already
    # wrote is left as it is, and so is one somebody else changed since (a person's resolution).
    before_digest: str | None = None


@dataclass
class DistillPlan:
    team: str
    now: datetime
    step: str = "distill"
    lookback: timedelta | None = None
    changes: list[PatternChange] = field(default_factory=list)
    # What the night took into account, and the declines it remembers (nightly only).
    marks: list[EpisodeUpdate] = field(default_factory=list)
    groups: int = 0
    skipped_groups: int = 0  # asked, no usable answer
    retry_groups: int = 0  # ... whose new episodes stay pending for the next night
    given_up_groups: int = 0  # ... asked distill.max_attempts times: given up (reported)
    pinned_matches: int = 0
    episodes_read: int = 0
    new_episodes: int = 0
    non_beliefs: int = 0  # answers whose statement is not a belief (a question, a status …): not written
    injections_blocked: int = 0  # answers whose statement reads as an order to the assistant / asks for secrets
    support_dropped: int = 0  # supporting ids that disagree with the statement on a slot
    too_little_support: int = 0  # answers left with fewer than distill.min_episodes supporting episodes
    not_absorbed: int = 0  # evidence of an active pattern kept raw: it does not state the pattern closely
    declined_groups: int = 0  # asked, the model found no belief in them (remembered on their episodes)
    declines_remembered: int = 0  # not asked: declined before, and too little has joined them since
    failure: str | None = None  # no question got a usable answer: the step fails after applying
    resumed: bool = False  # finished from the journal of an interrupted run

    def lines(self) -> list[str]:
        out = []
        for c in self.changes:
            p = c.pattern
            if c.action == "add":
                out.append(
                    f"+ pattern {p.id} [{p.status.value} {p.confidence:.2f}, {p.support_count} episodes] "
                    f"{one_line(p.statement)}"
                )
            elif c.action == "bump":
                b = c.before
                was = (
                    f"{b.support_count}→{p.support_count} episodes, {b.confidence:.2f}→{p.confidence:.2f}" if b else ""
                )
                out.append(f"~ evidence bump {p.id} ({was}) {one_line(p.statement)}")
            else:
                b = c.before
                out.append(
                    f"~ rescore {p.id} {b.status.value if b else '?'}→{p.status.value} "
                    f"{(b.confidence if b else 0):.2f}→{p.confidence:.2f} {one_line(p.statement)}"
                )
            if c.absorb:
                out.append(
                    f"    absorb {len(c.absorb)} episodes: {', '.join(c.absorb[:6])}{' …' if len(c.absorb) > 6 else ''}"
                )
            if c.unabsorb:
                out.append(f"    un-absorb {len(c.unabsorb)} episodes (below the floor)")
        if self.retry_groups:
            out.append(f"? {self.retry_groups} group(s) got no usable answer: asked again next night")
        if self.given_up_groups:
            out.append(f"! {self.given_up_groups} group(s) got no usable answer in any attempt: given up")
        return out

    def counts(self) -> dict[str, int]:
        return {
            "episodes_read": self.episodes_read,
            "new_episodes": self.new_episodes,
            "groups": self.groups,
            "patterns_added": sum(c.action == "add" for c in self.changes),
            "evidence_bumps": sum(c.action == "bump" for c in self.changes),
            "rescored": sum(c.action == "rescore" for c in self.changes),
            "absorbed": sum(len(c.absorb) for c in self.changes),
            "unabsorbed": sum(len(c.unabsorb) for c in self.changes),
            "skipped_groups": self.skipped_groups,
            "retry_groups": self.retry_groups,
            "given_up_groups": self.given_up_groups,
            "pinned_matches": self.pinned_matches,
            "non_beliefs": self.non_beliefs,
            "injections_blocked": self.injections_blocked,
            "support_dropped": self.support_dropped,
            "too_little_support": self.too_little_support,
            "not_absorbed": self.not_absorbed,
            "declined_groups": self.declined_groups,
            "declines_remembered": self.declines_remembered,
        }

    def empty(self) -> bool:
        return not (self.changes or self.marks)


def last_distill(graph: GraphStore, team: str) -> datetime | None:
    """The clock time of the last distill (nightly or watchdog) of ``team``: what the watchdog counts from."""
    raw = graph.get_meta(LAST_DISTILL.format(team=team))
    return from_ms(int(raw)) if raw else None


def _legacy_watermark(ctx: StepContext) -> datetime | None:
    raw = ctx.graph.get_meta(LEGACY_WATERMARK.format(team=ctx.team))
    return from_ms(int(raw)) if raw else None


def pending_for_night(e: Episode, legacy: datetime | None) -> bool:
    """Not yet taken into account by a nightly distill."""
    if e.distilled_at is not None:
        return False
    return legacy is None or e.ts > legacy or e.ingested_at > legacy


def plan(ctx: StepContext) -> DistillPlan:
    """``ctx.lookback`` set: a watchdog distill over that window only (it marks nothing: the night
    still reads the day). A lookback group with nothing new was in the stores at the last distill;
    asking again would spend a call on what the model already saw."""
    lookback = ctx.lookback
    s = ctx.settings.distill
    p = DistillPlan(team=ctx.team, now=ctx.now, lookback=lookback)
    window = lookback or timedelta(days=s.window_days)
    episodes = ctx.graph.episodes_in_window(ctx.team, [EpisodeStatus.RAW.value], ctx.now - window, ctx.now)
    is_new: Callable[[Episode], bool]
    if lookback is not None:
        last = last_distill(ctx.graph, ctx.team)
        is_new = (lambda e: True) if last is None else (lambda e: e.ingested_at > last)  # noqa: E731
    else:
        legacy = _legacy_watermark(ctx)
        # Arrived since the last night but timestamped before the window: read them too.
        late = ctx.graph.pending_raw_episodes(ctx.team, ctx.now - window, legacy)
        episodes = sorted({e.id: e for e in [*episodes, *late]}.values(), key=lambda e: (e.ts, e.id))
        is_new = lambda e: pending_for_night(e, legacy)  # noqa: E731
    people = frozenset(e.author.casefold() for e in episodes)
    learnable = distinct_texts([e for e in episodes if is_learnable(e, people)])
    p.episodes_read = len(episodes)
    p.new_episodes = sum(1 for e in learnable if is_new(e))

    patterns = {x.id: x for x in ctx.graph.patterns(ctx.team)}
    live = {i: x for i, x in patterns.items() if x.status in PATTERN_LIVE}
    evidence_eps = _episodes_by_id(ctx, {eid for x in live.values() for eid in x.evidence_ids})

    drafts: list[tuple[list[Episode], PatternDraft]] = []  # each belief of each answered group
    unanswered: list[tuple[list[Episode], Unanswered]] = []
    declined: list[list[Episode]] = []  # groups the model found no belief in
    answered = 0
    if p.new_episodes:
        vecs = ctx.vectors_of("episodes", [e.id for e in learnable])
        ents = ctx.graph.episode_entities([e.id for e in learnable])
        cands = [
            Candidate(
                e,
                vecs[e.id].tolist(),
                frozenset(m.key for m in ents.get(e.id, []) if m.role not in ("author", "channel")),
                _slots_of(e, ents, people),
                topics(e.text),
            )
            for e in learnable
            if e.id in vecs
        ]
        fresh = [
            g
            for g in group_episodes(
                cands,
                s.similarity_threshold,
                min_size=s.min_episodes,
                topic_bonus=s.topic_bonus,
                value_bonus=s.value_bonus,
            )
            if any(is_new(c.episode) for c in g.members)
        ]
        groups = [g for g in fresh if _worth_asking([c.episode for c in g.members], s.reask_growth)]
        p.declines_remembered = len(fresh) - len(groups)
        p.groups = len(groups)
        requests = [
            DistillRequest(
                team=ctx.team,
                group_key=g.key,
                episodes=tuple(
                    EpisodeView(
                        id=c.episode.id,
                        author=c.episode.author,
                        channel=c.episode.channel,
                        ts=c.episode.ts,
                        text=c.episode.text,
                        provenance=c.episode.provenance.value,
                    )
                    for c in g.members
                ),
                known_entities=tuple(sorted({m.name for c in g.members for m in ents.get(c.episode.id, [])})),
                min_support=s.min_episodes,
                reference_time=ctx.now,
            )
            for g in groups
        ]
        answers = ctx.llm.distill_many(requests)
        for g, a in zip(groups, answers, strict=True):
            members = [c.episode for c in g.members]
            if isinstance(a, Unanswered):
                unanswered.append((members, a))
                continue
            answered += 1
            if not a:
                declined.append(members)
            drafts.extend((members, d) for d in a)
    else:
        ents, vecs = {}, {}
    p.skipped_groups = len(unanswered)
    p.declined_groups = len(declined)
    if unanswered and not answered:
        p.failure = (
            f"distill {ctx.team}: none of {len(unanswered)} group(s) got a usable answer from the model "
            f"(last: {unanswered[-1][1].reason[:200]})"
        )
    if lookback is None:
        _mark(p, episodes, unanswered, is_new, s.max_attempts)
    _remember_declines(p, declined)

    working: dict[str, Pattern] = dict(live)
    changes: dict[str, PatternChange] = {}
    pvecs = ctx.vectors_of("patterns", list(live)) if drafts else {}
    statement_vecs = _embed(ctx, [d.statement for _, d in drafts])
    for (members, draft), svec in zip(drafts, statement_vecs, strict=True):
        # The guards hold whatever the model answered: a statement that is not a belief is not
        # written, and only episodes that state it (no slot disagreement) support it.
        kind = statement_kind(draft.statement, people)
        if kind is not Kind.BELIEF:
            p.injections_blocked += kind is Kind.INJECTION
            p.non_beliefs += kind is not Kind.INJECTION
            log.info("distill_statement_refused", kind=kind.value, statement=one_line(draft.statement, 120))
            continue
        by_id = {e.id: e for e in members}
        stated = slots(draft.statement, _names(members, ents), people)
        support = sorted(
            i
            for i in set(draft.supporting_ids)
            if not disagree(_slots_of(by_id[i], ents, people), stated, float(vecs[i] @ svec) if i in vecs else 0.0)
        )
        p.support_dropped += len(set(draft.supporting_ids)) - len(support)
        if len(support) < s.min_episodes:
            p.too_little_support += 1
            continue
        for e in (by_id[i] for i in support):
            evidence_eps[e.id] = e
        target = _match(ctx, draft, support, working, pvecs, svec, stated)
        if target is not None and target.pinned:
            p.pinned_matches += 1  # pinned facts are immune: never bumped, merged or rewritten
            continue
        # Subjects resolve against the group's own entities only: the same group always gives the
        # same links, whatever else is in the window (a rerun after a crash sees fewer raw episodes).
        entity_index = _entity_index({e.id: ents.get(e.id, []) for e in members})
        subjects = [entity_index[s.casefold()] for s in draft.subjects if s.casefold() in entity_index]
        subject_keys = sorted({m.key for m in subjects})
        if target is None:
            pid = pattern_id(ctx.team, support)
            kinds = {m.name: m.kind for m in subjects}
            channel = main_channel([e.channel for e in members])  # ties: the first to speak, never set order
            new = Pattern(
                id=pid,
                team=ctx.team,
                statement=draft.statement.strip(),
                kind=draft.kind,
                status=PatternStatus.TENTATIVE,
                confidence=0.0,
                llm_confidence=draft.confidence,
                evidence_ids=support,
                first_seen=min(by_id[i].ts for i in support),
                last_seen=max(by_id[i].ts for i in support),
                created_at=ctx.now,
                updated_at=ctx.now,
                valid_from=min(by_id[i].ts for i in support),
                subjects=sorted({m.name for m in subjects}),
                topic=topic_for([m.name for m in subjects], kinds, channel, draft.kind.value),
                availability_lag_s=_lag(ctx, [by_id[i] for i in support], s.min_episodes),
                evidence=draft.evidence,
                prompt_id=ctx.llm.prompt_ids["distill"],
                replaces=draft.replaces if draft.replaces and injection(draft.replaces) is None else None,
            )
            working[pid] = new
            changes[pid] = PatternChange(new, "add", subject_keys, [], [])
            pvecs[pid] = svec
        else:
            merged_ids = sorted(set(target.evidence_ids) | set(support))
            if merged_ids == sorted(target.evidence_ids) and target.llm_confidence == draft.confidence:
                continue  # nothing new (a rerun, or a group already counted)
            bumped = target.model_copy(
                update={
                    "evidence_ids": merged_ids,
                    "llm_confidence": draft.confidence,
                    "last_seen": max(target.last_seen, max(by_id[i].ts for i in support)),
                    "first_seen": min(target.first_seen, min(by_id[i].ts for i in support)),
                    "updated_at": ctx.now,
                }
            )
            prev = changes.get(target.id)
            working[target.id] = bumped
            changes[target.id] = PatternChange(
                bumped,
                prev.action if prev else "bump",
                sorted(set(prev.subject_keys if prev else []) | set(subject_keys)),
                [],
                [],
                before=prev.before if prev else target,
            )

    # Rescore every live, unpinned pattern from its ledger (the model's word is one input).
    floor = ctx.settings.distill.confidence_floor
    states = _states_it(ctx, working, evidence_eps, pvecs, people)
    for pid, pat in sorted(working.items()):
        if pat.pinned:
            continue
        led = _ledger(pat, evidence_eps)
        conf = ledger_confidence(led)
        status = status_for(conf, floor, pat.status)
        updated = pat.model_copy(
            update={
                "confidence": conf,
                "status": status,
                "support_count": led.support,
                "distinct_authors": led.authors,
                "distinct_channels": led.channels,
            }
        )
        absorbing = status is PatternStatus.ACTIVE
        raw = [i for i in updated.evidence_ids if i in evidence_eps and evidence_eps[i].status is EpisodeStatus.RAW]
        # Absorbing is destructive (the text goes after the grace period): only what states it.
        absorb = sorted(i for i in raw if absorbing and i in states.get(pid, ()))
        if absorbing and pid in changes:
            p.not_absorbed += len(raw) - len(absorb)
        unabsorb = (
            sorted(i for i, e in evidence_eps.items() if e.status is EpisodeStatus.ABSORBED and e.absorbed_by == pid)
            if status is not PatternStatus.ACTIVE and pat.status is PatternStatus.ACTIVE
            else []
        )
        for i in absorb:  # an episode is absorbed by one pattern only: the first that claims it
            evidence_eps[i] = evidence_eps[i].model_copy(update={"status": EpisodeStatus.ABSORBED, "absorbed_by": pid})
        prev = changes.get(pid)
        same = (
            prev is None
            and not absorb
            and not unabsorb
            and (updated.confidence, updated.status, updated.support_count)
            == (pat.confidence, pat.status, pat.support_count)
        )
        if same:
            continue
        if prev is None:
            updated = updated.model_copy(update={"updated_at": ctx.now})
        changes[pid] = PatternChange(
            updated,
            prev.action if prev else "rescore",
            prev.subject_keys if prev else [],
            absorb,
            unabsorb,
            before=prev.before if prev else pat,
        )
    for c in changes.values():
        c.before_digest = _digest(c.before) if c.before is not None else None
    p.changes = [changes[k] for k in sorted(changes, key=lambda k: (changes[k].action != "add", k))]
    return p


def _worth_asking(members: Sequence[Episode], growth: float) -> bool:
    """A group the model declined before is asked again once enough messages it did not see have
    joined it: ``growth`` of the declined group's size, at least one. (Asking the same chatter again
    would get the same answer and bill for it every night the channel is busy.)"""
    seen = max((e.declined_size for e in members), default=0)
    if seen == 0:
        return True
    unseen = sum(1 for e in members if e.declined_size == 0)
    return unseen >= max(1, math.ceil(growth * seen))


def _remember_declines(p: DistillPlan, declined: Sequence[Sequence[Episode]]) -> None:
    """Each episode of a declined group keeps the size of the largest such group (journaled with the
    marks: a crash and rerun remember the same declines an uninterrupted run does)."""
    size: dict[str, int] = {}
    for members in declined:
        for e in members:
            if len(members) > max(size.get(e.id, 0), e.declined_size):  # only what grows is written
                size[e.id] = len(members)
    at = {m.id: k for k, m in enumerate(p.marks)}
    for eid, n in sorted(size.items()):
        if eid in at:
            p.marks[at[eid]] = p.marks[at[eid]].model_copy(update={"declined_size": n})
        else:
            p.marks.append(EpisodeUpdate(id=eid, declined_size=n))


def _mark(
    p: DistillPlan,
    read: Sequence[Episode],
    unanswered: Sequence[tuple[list[Episode], Unanswered]],
    is_new: Callable[[Episode], bool],
    max_attempts: int,
) -> None:
    """What the night took into account. The new episodes of a group without a usable answer stay
    pending (one attempt more) until ``max_attempts``; then they are given up like the rest."""
    failed: dict[str, Episode] = {}
    for members, _ in unanswered:
        news = [e for e in members if is_new(e)]
        if any(e.distill_attempts + 1 < max_attempts for e in news):
            p.retry_groups += 1
        else:
            p.given_up_groups += 1
        failed.update({e.id: e for e in news})
    for e in sorted((e for e in read if is_new(e)), key=lambda e: e.id):
        f = failed.get(e.id)
        if f is None:
            p.marks.append(EpisodeUpdate(id=e.id, distilled_at=p.now))
        elif f.distill_attempts + 1 < max_attempts:
            p.marks.append(EpisodeUpdate(id=e.id, distill_attempts=f.distill_attempts + 1))
        else:
            p.marks.append(EpisodeUpdate(id=e.id, distill_attempts=f.distill_attempts + 1, distilled_at=p.now))


_KIND_RANK = {"project": 0, "tool": 1, "topic": 2, "person": 3, "channel": 4}


def _entity_index(ents: dict[str, list[Mention]]) -> dict[str, Mention]:
    """Subject name -> entity. One name can be several entities (#ops the tag, ops the channel):
    prefer project, tool, topic, person, channel, then the key — never the order rows came back in."""
    best: dict[str, Mention] = {}
    for rows in ents.values():
        for r in rows:
            name = r.name.casefold()
            cur = best.get(name)
            rank = (_KIND_RANK.get(r.kind, 9), r.key)
            if cur is None or rank < (_KIND_RANK.get(cur.kind, 9), cur.key):
                best[name] = r
    return best


def _lag(ctx: StepContext, support: Sequence[Episode], needed: int) -> float:
    """Pattern availability lag: from the ingestion of the episode that made the support enough
    (the third, by default) to now, when the pattern becomes recallable."""
    times = sorted(e.ingested_at for e in support)
    third = times[min(needed, len(times)) - 1]
    return max(0.0, round((ctx.now - third).total_seconds(), 3))


def _episodes_by_id(ctx: StepContext, ids: set[str]) -> dict[str, Episode]:
    return {e.id: e for e in ctx.graph.get_episodes(sorted(ids))} if ids else {}


def _ledger(p: Pattern, eps: dict[str, Episode]) -> Ledger:
    known = [eps[i] for i in p.evidence_ids if i in eps]
    return Ledger(
        support=len(set(p.evidence_ids)),
        counter=p.counter_count,
        authors=len({e.author for e in known}),
        channels=len({e.channel for e in known}),
        llm_confidence=p.llm_confidence,
    )


def _match(
    ctx: StepContext,
    draft: PatternDraft,
    support: Sequence[str],
    working: dict[str, Pattern],
    pvecs: dict[str, Any],
    svec: npt.NDArray[np.float64],
    stated: Slots,
) -> Pattern | None:
    """An existing pattern this draft restates: evidence overlap ≥ half, or statement similarity ≥
    match_threshold — and never one it disagrees with on a slot (a changed value is a new belief,
    for reflect to flag, not an evidence bump of the old one)."""

    def agrees(pid: str) -> bool:
        sim = float(pvecs[pid] @ svec) if pid in pvecs else 0.0
        return not disagree(stated, slots(working[pid].statement), max(sim, STRONG_SIMILARITY))

    sup = set(support)
    best: tuple[float, str] | None = None
    for pid, pat in working.items():
        overlap = len(sup & set(pat.evidence_ids)) / max(1, len(sup))
        if overlap >= 0.5 and agrees(pid):
            score = 2.0 + overlap
            if best is None or score > best[0]:
                best = (score, pid)
    if best is None and pvecs:
        ids = [i for i in pvecs if i in working]
        if ids:
            sims = np.stack([pvecs[i] for i in ids]) @ svec
            for k in np.argsort(-sims, kind="stable"):
                if float(sims[k]) < ctx.settings.distill.match_threshold:
                    break
                if agrees(ids[k]):
                    best = (float(sims[k]), ids[k])
                    break
    return working[best[1]] if best else None


def _states_it(
    ctx: StepContext,
    working: dict[str, Pattern],
    evidence: dict[str, Episode],
    pvecs: dict[str, Any],
    people: frozenset[str],
) -> dict[str, set[str]]:
    """Per pattern, its raw evidence that states it: a belief statement (the gate), as close to the
    pattern's statement as ``distill.absorb_similarity``, and disagreeing with it on no slot."""
    raw = {
        pid: [i for i in pat.evidence_ids if i in evidence and evidence[i].status is EpisodeStatus.RAW]
        for pid, pat in working.items()
        if not pat.pinned
    }
    raw = {pid: ids for pid, ids in raw.items() if ids}
    if not raw:
        return {}
    evecs = ctx.vectors_of("episodes", sorted({i for ids in raw.values() for i in ids}))
    missing = sorted(pid for pid in raw if pid not in pvecs)
    svecs = dict(pvecs) | (ctx.vectors_of("patterns", missing) if missing else {})
    floor = ctx.settings.distill.absorb_similarity
    out: dict[str, set[str]] = {}
    for pid, ids in raw.items():
        if pid not in svecs:
            continue
        stated = slots(working[pid].statement)
        out[pid] = set()
        for i in ids:
            if i not in evecs or not is_belief(evidence[i].text, people):
                continue
            sim = float(evecs[i] @ svecs[pid])
            if sim >= floor and not disagree(slots(evidence[i].text), stated, sim):
                out[pid].add(i)
    return out


def _names(members: Sequence[Episode], ents: dict[str, list[Mention]]) -> list[str]:
    """The named things a group's episodes link (mentions, tags, projects, tools): named slots."""
    return sorted({m.name for e in members for m in ents.get(e.id, []) if m.role not in ("author", "channel")})


def _slots_of(e: Episode, ents: dict[str, list[Mention]], people: frozenset[str]) -> Slots:
    return slots(e.text, _names([e], ents), people, e.author)


def _embed(ctx: StepContext, texts: Sequence[str]) -> list[npt.NDArray[np.float64]]:
    return [np.asarray(v, dtype=np.float64) for v in ctx.embedder.embed(list(texts))] if texts else []


def apply(ctx: StepContext, plan: DistillPlan) -> dict[str, int]:
    if not plan.resumed:
        ctx.graph.set_meta(JOURNAL.format(team=ctx.team), json.dumps(_to_journal(plan)))
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
                [{"kind": p.kind.value, "topic": p.topic} for p in live],
            )
    for i in range(0, len(plan.marks), MARK_BATCH):
        ctx.check_stop()
        ctx.graph.update_episodes(plan.marks[i : i + MARK_BATCH])
    crashpoint("distill.before_watermark")
    # The end, in one write: when this distill ran (the watchdog's cooldown counts from it) and the
    # journal closed. Before it, a crash leaves the journal, which the next run finishes.
    ctx.graph.finish_journal(LAST_DISTILL.format(team=ctx.team), str(to_ms(plan.now)), JOURNAL.format(team=ctx.team))
    if plan.failure:
        raise NoUsableAnswers(plan.failure, plan.counts())
    return plan.counts()


MARK_BATCH = 2000


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
        plan = _from_journal(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        # A journal this version cannot read must not fail every later night: set it aside, say so.
        log.error("distill_journal_unreadable", team=ctx.team, error=str(exc)[:300], kept_as=f"{key}:unreadable")
        ctx.graph.set_meta(f"{key}:unreadable", raw)
        ctx.graph.set_meta(key, "")
        return None
    current = {x.id: _digest(x) for x in ctx.graph.patterns_by_id([c.pattern.id for c in plan.changes])}
    kept = [c for c in plan.changes if current.get(c.pattern.id) == c.before_digest]
    for c in plan.changes:
        if c not in kept and current[c.pattern.id] != _digest(c.pattern):
            log.warning("distill_resume_skipped", pattern_id=c.pattern.id, reason="changed since the plan")
    plan.changes = kept
    log.info("distill_resumed", team=ctx.team, planned_at=plan.now.isoformat(), changes=len(kept))
    try:
        return apply(ctx, plan)
    except NoUsableAnswers:
        return plan.counts()  # the interrupted run already reported its failure


def _to_journal(plan: DistillPlan) -> dict[str, Any]:
    return {
        "team": plan.team,
        "now": plan.now.isoformat(),
        "lookback_s": plan.lookback.total_seconds() if plan.lookback is not None else None,
        "changes": [
            {
                "pattern": c.pattern.model_dump(mode="json"),
                "action": c.action,
                "subject_keys": c.subject_keys,
                "absorb": c.absorb,
                "unabsorb": c.unabsorb,
                "before_digest": c.before_digest,
            }
            for c in plan.changes
        ],
        "marks": [m.model_dump(mode="json", exclude_unset=True) for m in plan.marks],
        "counts": plan.counts(),
        "failure": plan.failure,
    }


def _from_journal(d: dict[str, Any]) -> DistillPlan:
    counts = d.get("counts", {})
    plan = DistillPlan(
        team=d["team"],
        now=datetime.fromisoformat(d["now"]),
        lookback=timedelta(seconds=d["lookback_s"]) if d.get("lookback_s") is not None else None,
        changes=[
            PatternChange(
                Pattern.model_validate(c["pattern"]),
                c["action"],
                list(c["subject_keys"]),
                list(c["absorb"]),
                list(c["unabsorb"]),
                before_digest=c.get("before_digest"),
            )
            for c in d["changes"]
        ],
        marks=[_mark_from_journal(m) for m in d["marks"]],
        failure=d.get("failure"),
        resumed=True,
    )
    for name in ("groups", "skipped_groups", "retry_groups", "given_up_groups", "pinned_matches", "non_beliefs",
                 "injections_blocked", "support_dropped", "too_little_support", "not_absorbed", "declined_groups",
                 "declines_remembered"):  # fmt: skip
        setattr(plan, name, int(counts.get(name, 0)))
    plan.episodes_read = int(counts.get("episodes_read", 0))
    plan.new_episodes = int(counts.get("new_episodes", 0))
    return plan


def _mark_from_journal(m: dict[str, Any]) -> EpisodeUpdate:
    """A journaled mark; journals written before marks were typed hold ``{"id", "set": {... ms}}``."""
    if "set" not in m:
        return EpisodeUpdate.model_validate(m)
    fields = {k: from_ms(int(v)) if k.endswith("_at") and v is not None else v for k, v in m["set"].items()}
    return EpisodeUpdate.model_validate({"id": m["id"], **fields})


def _digest(p: Pattern) -> str:
    return hashlib.sha256(json.dumps(p.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def _write_patterns(ctx: StepContext, plan: DistillPlan, written: list[Pattern]) -> None:
    for c in plan.changes:
        ctx.check_stop()
        pat = c.pattern
        sets = {
            i: EpisodeUpdate(
                id=i, status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=plan.now, absorbed_by=pat.id
            )
            for i in c.absorb
        }
        sets.update(
            {
                i: EpisodeUpdate(id=i, status=EpisodeStatus.RAW, schema_absorbed=0, absorbed_at=None, absorbed_by=None)
                for i in c.unabsorb
            }
        )
        evidence = [sets.pop(i, EpisodeUpdate(id=i)) for i in pat.evidence_ids]
        evidence += list(sets.values())
        ctx.graph.write_pattern(pat, c.subject_keys, evidence)
        written.append(pat)
        crashpoint("distill.after_pattern_graph")
