"""Distill's decisions, pure: from what was read and answered to the plan (no store, no model here).

Match each answer against existing patterns (evidence overlap or statement similarity -> bump
instead of duplicate), rescore every live pattern from its ledger, absorb the evidence that states
an active pattern, and mark what the night took into account. A group whose answer was unusable
keeps its new episodes pending: the next night asks again, until ``distill.max_attempts`` distinct
nights got no usable answer (counted once per calendar night, however often it is rerun).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

import numpy as np
import structlog

from taskzilla_sleep.core.models import Episode, EpisodeStatus, Pattern, PatternStatus
from taskzilla_sleep.core.settings import DistillSettings, Settings
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.llm.base import PatternDraft, Unanswered
from taskzilla_sleep.night.steps.base import Vector
from taskzilla_sleep.night.steps.distill.plan import DistillPlan, PatternChange, digest
from taskzilla_sleep.night.steps.distill.read import DistillInputs, names_of, slots_of
from taskzilla_sleep.rules.beliefs import Slots, injection, is_belief, mentioned_numbers, slots, value_conflict
from taskzilla_sleep.rules.beliefs.language import reads, rules_read
from taskzilla_sleep.rules.beliefs.prefilter import only_questions
from taskzilla_sleep.rules.policies import (
    STRONG_SIMILARITY,
    Ledger,
    cohesion,
    disagree,
    ledger_confidence,
    main_channel,
    pattern_id,
    status_for,
    topic_for,
)
from taskzilla_sleep.stores.ports import EpisodeUpdate, Mention

log = structlog.get_logger(__name__)

_KIND_RANK = {"project": 0, "tool": 1, "topic": 2, "person": 3, "channel": 4}


def decide(inputs: DistillInputs, settings: Settings, now: datetime) -> DistillPlan:
    s = settings.distill
    plan = DistillPlan(team=inputs.team, now=now, lookback=inputs.lookback)
    seen = plan.seen
    seen.episodes_read = len(inputs.episodes)
    seen.new_episodes = sum(1 for e in inputs.learnable if e.id in inputs.new_ids)
    seen.groups = len(inputs.asked)
    seen.declines_remembered = inputs.fresh_groups - len(inputs.asked) - len(inputs.deferred)
    seen.deferred_groups = len(inputs.deferred)
    seen.withheld = sum(inputs.withheld.values())
    seen.shown, seen.unread = inputs.shown, inputs.unread
    if inputs.unread and inputs.lookback is None:
        share = inputs.unread / max(1, inputs.shown)
        log.warning(
            "distill_unread",
            team=inputs.team,
            share=round(share, 3),
            unread=inputs.unread,
            shown=inputs.shown,
            hint=f"{share:.0%} of team {inputs.team}'s messages are not in a language the offline judgement reads; "
            "configure a model (llm.model)",
        )
    plan.deferred_reason = inputs.deferred_reason
    plan.estimate = inputs.estimate

    drafts: list[tuple[Sequence[Episode], PatternDraft, Vector]] = []  # each belief of each answered group
    unanswered = [(g.members, g.answer) for g in inputs.asked if isinstance(g.answer, Unanswered)]
    declined = [g.members for g in inputs.asked if not isinstance(g.answer, Unanswered) and not g.answer]
    for g in inputs.asked:
        if not isinstance(g.answer, Unanswered):
            drafts += [(g.members, d, v) for d, v in zip(g.answer, g.statement_vectors, strict=True)]
    seen.skipped_groups = len(unanswered)
    seen.declined_groups = len(declined)
    if unanswered and len(unanswered) == len(inputs.asked):
        plan.failure = (
            f"distill {inputs.team}: none of {len(unanswered)} group(s) got a usable answer from the model "
            f"(last: {unanswered[-1][1].reason[:200]})"
        )
    if inputs.lookback is None:
        _mark(plan, inputs, [m for m, _ in unanswered], s.max_attempts)
    _remember_declines(plan, declined)

    work = _Working(
        plan,
        inputs,
        s,
        now,
        dict(inputs.live),
        {},
        dict(inputs.evidence),
        dict(inputs.pattern_vectors),
        ZoneInfo(settings.schedule.timezone),
    )
    for members, draft, statement_vector in drafts:
        _take(work, members, draft, statement_vector)
    _rescore(work)
    changes = work.changes
    for c in changes.values():
        c.before_digest = digest(c.before) if c.before is not None else None
    plan.changes = [changes[k] for k in sorted(changes, key=lambda k: (changes[k].action != "add", k))]
    return plan


@dataclass
class _Working:
    """The decision in progress: the patterns as they would stand, and what changed so far."""

    plan: DistillPlan
    inputs: DistillInputs
    s: DistillSettings
    now: datetime
    patterns: dict[str, Pattern]  # live patterns, as changed by the answers taken so far
    changes: dict[str, PatternChange]
    evidence: dict[str, Episode]  # evidence episodes, with the absorptions decided so far
    pattern_vectors: dict[str, Vector]  # of the live patterns and the new ones
    tz: tzinfo = UTC  # what "one day" is: the schedule's time zone


def _take(work: _Working, members: Sequence[Episode], draft: PatternDraft, statement_vector: Vector) -> None:
    """One belief the model stated: refused, a new pattern, or more evidence of an existing one."""
    plan, inputs, s, now = work.plan, work.inputs, work.s, work.now
    working, changes, evidence, pattern_vectors = work.patterns, work.changes, work.evidence, work.pattern_vectors
    # The judge (a model, or the offline rules) decided what is a belief; these guards hold whatever it
    # answered, in any language: no statement that reads as an order to the assistant, only messages
    # that state it (no value disagreement), enough of them, from enough people, on enough days.
    if injection(draft.statement) is not None:
        plan.seen.injections_blocked += 1
        log.info("distill_statement_refused", kind="injection", statement=one_line(draft.statement, 120))
        return
    if only_questions(draft.statement):  # a question is never a belief, in any language
        plan.seen.non_beliefs += 1
        log.info("distill_statement_refused", kind="question", statement=one_line(draft.statement, 120))
        return
    ents, vectors = inputs.entities, inputs.episode_vectors
    by_id = {e.id: e for e in members}
    stated = slots(draft.statement, names_of(members, ents), inputs.people)

    def states_it(i: str) -> bool:
        """A cited message supports the statement: about it (similar enough, in any language) and
        disagreeing with it on no value (a changed number barely moves an embedding)."""
        sim = float(vectors[i] @ statement_vector) if i in vectors else 0.0
        said = by_id[i]
        return (
            sim >= s.support_similarity
            and value_conflict(slots_of(said, ents, inputs.people), stated, mentioned_numbers(said.text)) is None
        )

    support = sorted(i for i in set(draft.supporting_ids) if states_it(i))
    plan.seen.support_dropped += len(set(draft.supporting_ids)) - len(support)
    if len(support) < s.min_episodes:
        plan.seen.too_little_support += 1
        return
    # One thing said in other words, not a catch-all of messages each saying something else.
    if cohesion([vectors[i].tolist() for i in support if i in vectors]) < s.min_cohesion:
        plan.seen.catch_all += 1
        log.info("distill_belief_refused", reason="catch-all", support=len(support))
        return
    people = {by_id[i].author.casefold() for i in support}
    days = {by_id[i].ts.astimezone(work.tz).date() for i in support}
    if len(people) < s.min_authors and len(days) < s.min_days:  # one person in one conversation
        plan.seen.too_few_people += 1
        log.info("distill_belief_refused", reason="too few people and days", people=len(people), days=len(days))
        return
    for e in (by_id[i] for i in support):
        evidence[e.id] = e
    target = _match(s, support, working, pattern_vectors, statement_vector, stated, draft.statement)
    if target is not None and target.pinned:
        plan.seen.pinned_matches += 1  # pinned facts are immune: never bumped, merged or rewritten
        return
    # Subjects resolve against the group's own entities only: the same group always gives the
    # same links, whatever else is in the window (a rerun after a crash sees fewer raw episodes).
    entity_index = _entity_index({e.id: ents.get(e.id, []) for e in members})
    subjects = [entity_index[x.casefold()] for x in draft.subjects if x.casefold() in entity_index]
    subject_keys = sorted({m.key for m in subjects})
    if target is None:
        pid = pattern_id(inputs.team, support)
        kinds = {m.name: m.kind for m in subjects}
        channel = main_channel([e.channel for e in members])  # ties: the first to speak, never set order
        new = Pattern(
            id=pid,
            team=inputs.team,
            statement=draft.statement.strip(),
            kind=draft.kind,
            status=PatternStatus.TENTATIVE,
            confidence=0.0,
            llm_confidence=draft.confidence,
            evidence_ids=support,
            first_seen=min(by_id[i].ts for i in support),
            last_seen=max(by_id[i].ts for i in support),
            created_at=now,
            updated_at=now,
            valid_from=min(by_id[i].ts for i in support),
            subjects=sorted({m.name for m in subjects}),
            topic=topic_for([m.name for m in subjects], kinds, channel, draft.kind.value),
            availability_lag_s=_lag(now, [by_id[i] for i in support], s.min_episodes),
            evidence=draft.evidence,
            prompt_id=inputs.prompt_id,
            replaces=draft.replaces if draft.replaces and injection(draft.replaces) is None else None,
        )
        working[pid] = new
        changes[pid] = PatternChange(new, "add", subject_keys, [], [])
        pattern_vectors[pid] = statement_vector
        return
    merged_ids = sorted(set(target.evidence_ids) | set(support))
    if merged_ids == sorted(target.evidence_ids) and target.llm_confidence == draft.confidence:
        return  # nothing new (a rerun, or a group already counted)
    bumped = target.model_copy(
        update={
            "evidence_ids": merged_ids,
            "llm_confidence": draft.confidence,
            "last_seen": max(target.last_seen, max(by_id[i].ts for i in support)),
            "first_seen": min(target.first_seen, min(by_id[i].ts for i in support)),
            "updated_at": now,
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


def _rescore(work: _Working) -> None:
    """Every live, unpinned pattern rescored from its ledger (the model's word is one input)."""
    plan, inputs, s, now = work.plan, work.inputs, work.s, work.now
    working, changes, evidence = work.patterns, work.changes, work.evidence
    pattern_vectors = work.pattern_vectors
    states = _states_it(s, working, evidence, inputs.episode_vectors, pattern_vectors, inputs)
    for pid, pat in sorted(working.items()):
        if pat.pinned:
            continue
        ledger = _ledger(pat, evidence)
        conf = ledger_confidence(ledger)
        status = status_for(conf, s.confidence_floor, pat.status)
        updated = pat.model_copy(
            update={
                "confidence": conf,
                "status": status,
                "support_count": ledger.support,
                "distinct_authors": ledger.authors,
                "distinct_channels": ledger.channels,
            }
        )
        absorbing = status is PatternStatus.ACTIVE
        raw = [i for i in updated.evidence_ids if i in evidence and evidence[i].status is EpisodeStatus.RAW]
        # Absorbing is destructive (the text goes after the grace period): only what states it.
        absorb = sorted(i for i in raw if absorbing and i in states.get(pid, ()))
        if absorbing and pid in changes:
            plan.seen.not_absorbed += len(raw) - len(absorb)
        unabsorb = (
            sorted(i for i, e in evidence.items() if e.status is EpisodeStatus.ABSORBED and e.absorbed_by == pid)
            if status is not PatternStatus.ACTIVE and pat.status is PatternStatus.ACTIVE
            else []
        )
        for i in absorb:  # an episode is absorbed by one pattern only: the first that claims it
            evidence[i] = evidence[i].model_copy(update={"status": EpisodeStatus.ABSORBED, "absorbed_by": pid})
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
            updated = updated.model_copy(update={"updated_at": now})
        changes[pid] = PatternChange(
            updated,
            prev.action if prev else "rescore",
            prev.subject_keys if prev else [],
            absorb,
            unabsorb,
            before=prev.before if prev else pat,
        )


def _remember_declines(plan: DistillPlan, declined: Sequence[Sequence[Episode]]) -> None:
    """Each episode of a declined group keeps the size of the largest such group (journaled with the
    marks: a crash and rerun remember the same declines an uninterrupted run does)."""
    size: dict[str, int] = {}
    for members in declined:
        for e in members:
            if len(members) > max(size.get(e.id, 0), e.declined_size):  # only what grows is written
                size[e.id] = len(members)
    at = {m.id: k for k, m in enumerate(plan.marks)}
    for eid, n in sorted(size.items()):
        if eid in at:
            plan.marks[at[eid]] = plan.marks[at[eid]].model_copy(update={"declined_size": n})
        else:
            plan.marks.append(EpisodeUpdate(id=eid, declined_size=n))


def _mark(plan: DistillPlan, inputs: DistillInputs, unanswered: Sequence[Sequence[Episode]], max_attempts: int) -> None:
    """What the night took into account. A group without a usable answer counts one attempt per
    calendar night (``inputs.night``: a rerun, a catch-up or a watchdog pass of the same night counts
    none): its new episodes stay pending until ``max_attempts`` nights failed, then they are given up
    like the rest (``distill retry`` asks again): the only episodes marked taken into account that keep
    their count. One whose group got an answer, or that is in no group asked, starts afresh."""
    night = inputs.night
    failed: dict[str, Episode] = {}
    for members in unanswered:
        news = [e for e in members if e.id in inputs.new_ids]
        if any(_attempts(e, night) < max_attempts for e in news):
            plan.seen.retry_groups += 1
        else:
            plan.seen.given_up_groups += 1
        failed.update({e.id: e for e in news})
    marks: dict[str, dict[str, object]] = {}
    # Not asked (budget or window): untouched, so the next night takes them first, as if never seen.
    left = {e.id for members in inputs.deferred for e in members}
    for e in (e for e in inputs.episodes if e.id in inputs.new_ids and e.id not in left):
        f = failed.get(e.id)
        if f is None:  # asked and answered, or in no group asked: what it failed before no longer counts
            marks[e.id] = {"distilled_at": plan.now}
            if e.distill_attempts or e.distill_night is not None:
                marks[e.id] |= {"distill_attempts": None, "distill_night": None}
            continue
        n = _attempts(f, night)
        change: dict[str, object] = {} if n == f.distill_attempts else {"distill_attempts": n, "distill_night": night}
        if n >= max_attempts:
            change["distilled_at"] = plan.now
        if change:
            marks[e.id] = change
    for g in inputs.asked:  # answered (a belief, or none): what it failed before no longer counts
        if not isinstance(g.answer, Unanswered):
            for e in g.members:
                if e.distill_attempts or e.distill_night is not None:
                    marks.setdefault(e.id, {}).update(distill_attempts=None, distill_night=None)
    plan.marks += [EpisodeUpdate.model_validate({"id": i, **c}) for i, c in sorted(marks.items())]


def _attempts(e: Episode, night: str) -> int:
    """``e``'s failed nights once this one counts: a night already counted is not counted again."""
    return e.distill_attempts + (0 if night and e.distill_night == night else 1)


def _entity_index(ents: Mapping[str, Sequence[Mention]]) -> dict[str, Mention]:
    """Subject name -> entity. One name can be several entities (#ops the tag, ops the channel):
    prefer project, tool, topic, person, channel, then the key — never the order rows came back in."""
    best: dict[str, Mention] = {}
    for mentions in ents.values():
        for m in mentions:
            name = m.name.casefold()
            cur = best.get(name)
            rank = (_KIND_RANK.get(m.kind, 9), m.key)
            if cur is None or rank < (_KIND_RANK.get(cur.kind, 9), cur.key):
                best[name] = m
    return best


def _lag(now: datetime, support: Sequence[Episode], needed: int) -> float:
    """Pattern availability lag: from the ingestion of the episode that made the support enough
    (the third, by default) to now, when the pattern becomes recallable."""
    times = sorted(e.ingested_at for e in support)
    third = times[min(needed, len(times)) - 1]
    return max(0.0, round((now - third).total_seconds(), 3))


def _ledger(pattern: Pattern, eps: Mapping[str, Episode]) -> Ledger:
    known = [eps[i] for i in pattern.evidence_ids if i in eps]
    return Ledger(
        support=len(set(pattern.evidence_ids)),
        counter=pattern.counter_count,
        authors=len({e.author for e in known}),
        channels=len({e.channel for e in known}),
        llm_confidence=pattern.llm_confidence,
    )


def _match(
    s: DistillSettings,
    support: Sequence[str],
    working: Mapping[str, Pattern],
    pattern_vectors: Mapping[str, Vector],
    statement_vector: Vector,
    stated: Slots,
    statement: str,
) -> Pattern | None:
    """An existing pattern this draft restates: evidence overlap ≥ half, or the same statement (its
    words, case and spacing aside) — and never one it disagrees with on a slot. Only a pinned fact is
    found by similarity too (``match_threshold``: the caller leaves it alone). Two statements that are
    merely alike are two patterns for reflect to weigh, where the judge says "same" and the value guard
    holds: similarity is not identity ("the report is due on the 1st" and "… on the 15th", "Mittwoch"
    and "Donnerstag" barely move an embedding, and the slots read English only)."""

    def agrees(pid: str) -> bool:
        sim = float(pattern_vectors[pid] @ statement_vector) if pid in pattern_vectors else 0.0
        return not disagree(stated, slots(working[pid].statement), max(sim, STRONG_SIMILARITY))

    sup = set(support)
    said = _said(statement)
    best: tuple[float, str] | None = None
    for pid, pat in working.items():
        overlap = len(sup & set(pat.evidence_ids)) / max(1, len(sup))
        score = 2.0 + overlap if overlap >= 0.5 else 1.0 if _said(pat.statement) == said else 0.0
        if score and agrees(pid) and (best is None or score > best[0]):
            best = (score, pid)
    if best is None and pattern_vectors:
        ids = [i for i in pattern_vectors if i in working and working[i].pinned]
        if ids:
            sims = np.stack([pattern_vectors[i] for i in ids]) @ statement_vector
            k = int(np.argmax(sims))
            if float(sims[k]) >= s.match_threshold:
                best = (float(sims[k]), ids[k])
    return working[best[1]] if best else None


def _said(statement: str) -> str:
    return " ".join(statement.casefold().split()).rstrip(".!")


def _states_it(
    s: DistillSettings,
    working: Mapping[str, Pattern],
    evidence: Mapping[str, Episode],
    episode_vectors: Mapping[str, Vector],
    pattern_vectors: Mapping[str, Vector],
    inputs: DistillInputs,
) -> dict[str, set[str]]:
    """Per pattern, its raw evidence that states it: a belief statement (the gate), as close to the
    pattern's statement as ``distill.absorb_similarity``, and disagreeing with it on no slot; in a
    language the gate or the embedder reads (otherwise nothing can tell that it states it)."""
    out: dict[str, set[str]] = {}
    for pid, pat in working.items():
        ids = [i for i in pat.evidence_ids if i in evidence and evidence[i].status is EpisodeStatus.RAW]
        if pat.pinned or not ids or pid not in pattern_vectors:
            continue
        stated = slots(pat.statement)
        out[pid] = set()
        for i in ids:
            text = evidence[i].text
            if i not in episode_vectors:
                continue
            # The belief gate reads English: one more guard where it reads the message; elsewhere the
            # embedder must read it (an English embedder finds any two German texts close).
            if not (is_belief(text, inputs.people) if rules_read(text) else reads(inputs.embedder_reads, text)):
                continue
            sim = float(episode_vectors[i] @ pattern_vectors[pid])
            if sim >= s.absorb_similarity and not disagree(slots(evidence[i].text), stated, sim):
                out[pid].add(i)
    return out
