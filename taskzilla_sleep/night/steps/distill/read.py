"""Distill's reads: the raw episodes, the live patterns and their evidence, vectors, entities, and
the model's answers for the groups worth asking about. Everything ``decide`` needs, nothing it decides."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from taskzilla_sleep.core.models import PATTERN_LIVE, Episode, EpisodeStatus, Pattern, from_ms
from taskzilla_sleep.core.settings import DistillSettings
from taskzilla_sleep.llm.base import DistillRequest, EpisodeView, PatternDraft, Unanswered

# The meta keys are memory's (an export carries them): see memory/meta_keys.py.
from taskzilla_sleep.memory.meta_keys import DISTILL_DEFERRED as DEFERRED
from taskzilla_sleep.memory.meta_keys import LAST_DISTILL as LAST_DISTILL
from taskzilla_sleep.memory.meta_keys import LEGACY_WATERMARK
from taskzilla_sleep.night import budget
from taskzilla_sleep.night.budget import Deferral, Estimate
from taskzilla_sleep.night.schedule import calendar_night
from taskzilla_sleep.night.steps.base import StepContext, Vector
from taskzilla_sleep.night.steps.distill.topics import Message, topics
from taskzilla_sleep.rules.beliefs import Slots, prefilter, slots
from taskzilla_sleep.rules.beliefs.language import language_of
from taskzilla_sleep.rules.policies import distinct_texts, group_key
from taskzilla_sleep.stores.ports import GraphStore, Mention


@dataclass(frozen=True)
class AskedGroup:
    """One group the model was asked about, and its answer."""

    members: tuple[Episode, ...]
    answer: tuple[PatternDraft, ...] | Unanswered
    statement_vectors: tuple[Vector, ...] = ()  # one per belief of the answer


@dataclass(frozen=True)
class DistillInputs:
    team: str
    lookback: timedelta | None  # a watchdog distill: only this window
    episodes: tuple[Episode, ...]  # every raw episode read, by (ts, id)
    new_ids: frozenset[str]  # of those, what this distill counts as new
    people: frozenset[str]  # the authors of the window, casefolded (first person vs the team)
    learnable: tuple[Episode, ...]  # what may support a belief
    live: Mapping[str, Pattern]  # the team's live patterns, by (created_at, id)
    evidence: Mapping[str, Episode]  # the episodes the live patterns name as evidence
    entities: Mapping[str, Sequence[Mention]]  # of the learnable episodes
    episode_vectors: Mapping[str, Vector]  # of the learnable episodes and the live patterns' raw evidence
    pattern_vectors: Mapping[str, Vector]  # of the live patterns
    fresh_groups: int  # groups holding something new
    asked: tuple[AskedGroup, ...]  # ... of them, the ones worth asking (the rest were declined before)
    prompt_id: str
    # Worth asking but not asked: the budget or the window ran out (their new episodes stay pending).
    deferred: tuple[tuple[Episode, ...], ...] = ()
    deferred_reason: str | None = None  # "budget: calls" | "budget: tokens" | "window"
    estimate: Estimate = Estimate()  # what asking every group worth asking takes (before the gate)
    # The calendar night this distill belongs to (``scheduler.calendar_night``): a group's unusable
    # answers count once a night, however often the night is rerun or caught up.
    night: str = ""
    withheld: Mapping[str, int] = field(default_factory=dict)  # not shown to the judge, by reason (prefilter)
    shown: int = 0  # messages shown to the judge (in the topics asked)
    unread: int = 0  # ... of them, in a language the judge does not read (the offline rules: English only)
    # The languages the embedder compares meanings in (None: any, as its operator chose it): ``language.reads``.
    embedder_reads: frozenset[str] | None = None


def last_distill(graph: GraphStore, team: str) -> datetime | None:
    """The clock time of the last distill (nightly or watchdog) of ``team``: what the watchdog counts from."""
    raw = graph.get_meta(LAST_DISTILL.format(team=team))
    return from_ms(int(raw)) if raw else None


def last_deferral(graph: GraphStore, team: str) -> Deferral | None:
    """The groups the last full-window distill of ``team`` left for later (budget or window), if any."""
    raw = graph.get_meta(DEFERRED.format(team=team))
    if not raw:
        return None
    try:
        d = json.loads(raw)
        return Deferral(team, int(d["groups"]), str(d["reason"]))
    except (ValueError, KeyError, TypeError):
        return Deferral(team, 1, "unknown")  # unreadable: assume work is left (a pass that finds none clears it)


def pending_for_night(e: Episode, legacy: datetime | None) -> bool:
    """Not yet taken into account by a nightly distill."""
    if e.distilled_at is not None:
        return False
    return legacy is None or e.ts > legacy or e.ingested_at > legacy


def read(ctx: StepContext) -> DistillInputs:
    """``ctx.lookback`` set: a watchdog distill over that window only (it marks nothing: the night
    still reads the day). A lookback group with nothing new was in the stores at the last distill;
    asking again would spend a call on what the model already saw."""
    s = ctx.settings.distill
    window = ctx.lookback or timedelta(days=s.window_days)
    episodes = ctx.graph.episodes_in_window(ctx.team, [EpisodeStatus.RAW.value], ctx.now - window, ctx.now)
    is_new: Callable[[Episode], bool]
    if ctx.lookback is not None:
        last = last_distill(ctx.graph, ctx.team)
        is_new = (lambda e: True) if last is None else (lambda e: e.ingested_at > last)  # noqa: E731
    else:
        raw = ctx.graph.get_meta(LEGACY_WATERMARK.format(team=ctx.team))
        legacy = from_ms(int(raw)) if raw else None
        # Arrived since the last night but timestamped before the window: read them too.
        late = ctx.graph.pending_raw_episodes(ctx.team, ctx.now - window, legacy)
        episodes = sorted({e.id: e for e in [*episodes, *late]}.values(), key=lambda e: (e.ts, e.id))
        is_new = lambda e: pending_for_night(e, legacy)  # noqa: E731
    people = frozenset(e.author.casefold() for e in episodes)
    # Only language-neutral, certain filters before the judge (beliefs/prefilter.py): the judge, a
    # model or the offline rules, decides what is a belief.
    reasons = {e.id: prefilter.withheld(e) for e in episodes}
    withheld = Counter(w.value for w in reasons.values() if w is not None)
    learnable = distinct_texts([e for e in episodes if reasons[e.id] is None])
    new_ids = frozenset(e.id for e in episodes if is_new(e))

    live = {x.id: x for x in ctx.graph.patterns(ctx.team) if x.status in PATTERN_LIVE}
    wanted = sorted({eid for x in live.values() for eid in x.evidence_ids})
    evidence = {e.id: e for e in ctx.graph.get_episodes(wanted)} if wanted else {}

    vectors: dict[str, Vector] = {}
    entities: dict[str, list[Mention]] = {}
    fresh: list[list[Episode]] = []
    if any(e.id in new_ids for e in learnable):
        vectors = ctx.vectors_of("episodes", [e.id for e in learnable])
        entities = ctx.graph.episode_entities([e.id for e in learnable])
        fresh = [m for m in _topics(learnable, vectors, entities, s) if any(e.id in new_ids for e in m)]
    worth = [m for m in fresh if _worth_asking(m, s.reask_growth)]
    answered = _answered(ctx, [e for m in worth for e in m])
    requests = [_request(ctx, m, entities, s.min_episodes, people, answered) for m in worth]
    # What the judge cannot read (the offline rules read English only), per team: said, not guessed at.
    reads: frozenset[str] | None = getattr(ctx.llm, "languages", None)  # a provider that does not say: any
    shown = [e for m in worth for e in m]
    unread = 0 if reads is None else sum(1 for e in shown if (lang := language_of(e.text)) and lang not in reads)
    pending = budget.estimate(requests, ctx.settings.llm.batch_groups, ctx.settings.llm.model)
    got, deferred_reason = _ask(ctx, requests, [_oldest(m, new_ids) for m in worth])
    deferred = tuple(tuple(m) for i, m in enumerate(worth) if i not in got)
    worth = [m for i, m in enumerate(worth) if i in got]  # in grouping order, as an unbudgeted night
    answers = [got[i] for i in sorted(got)]
    drafts = [d for a in answers if not isinstance(a, Unanswered) for d in a]
    statement_vectors = ctx.embed([d.statement for d in drafts]) if drafts else []
    asked: list[AskedGroup] = []
    for members, a in zip(worth, answers, strict=True):
        n = 0 if isinstance(a, Unanswered) else len(a)
        mine, statement_vectors = statement_vectors[:n], statement_vectors[n:]
        asked.append(AskedGroup(tuple(members), a if isinstance(a, Unanswered) else tuple(a), tuple(mine)))

    # Absorbing reads how close each live pattern's raw evidence is to its statement.
    raw_evidence = sorted(
        {i for x in live.values() if not x.pinned for i in x.evidence_ids if _is_raw(evidence.get(i))} - set(vectors)
    )
    if raw_evidence:
        vectors |= ctx.vectors_of("episodes", raw_evidence)
    return DistillInputs(
        team=ctx.team,
        lookback=ctx.lookback,
        episodes=tuple(episodes),
        new_ids=new_ids,
        people=people,
        learnable=tuple(learnable),
        live=live,
        evidence=evidence,
        entities=entities,
        episode_vectors=vectors,
        pattern_vectors=ctx.vectors_of("patterns", list(live)) if live else {},
        fresh_groups=len(fresh),
        asked=tuple(asked),
        deferred=deferred,
        deferred_reason=deferred_reason if deferred else None,
        estimate=pending,
        prompt_id=ctx.llm.prompt_ids["distill"],
        night=calendar_night(ctx.now, ctx.settings.schedule),
        withheld=dict(sorted(withheld.items())),
        shown=len(shown),
        unread=unread,
        embedder_reads=getattr(ctx.embedder, "languages", None),
    )


def _oldest(members: Sequence[Episode], new_ids: frozenset[str]) -> tuple[datetime, str]:
    """A group's place in the queue: its oldest pending message (deferred work is taken first)."""
    return min((e.ts, e.id) for e in members if e.id in new_ids)


def _ask(
    ctx: StepContext, requests: Sequence[DistillRequest], keys: Sequence[tuple[datetime, str]]
) -> tuple[dict[int, tuple[PatternDraft, ...] | Unanswered], str | None]:
    """The answers by index into ``requests``, and why the rest were not asked (None: all were).

    Asked as :func:`budget.ask_in_rounds` asks, oldest group first (deferred work is taken first);
    a group too small to ask goes with the first round, at no cost."""
    llm = ctx.settings.llm
    order = sorted(range(len(requests)), key=lambda i: keys[i])
    queue = [[order[i] for i in b] for b in budget.batches([requests[i] for i in order], llm.batch_groups)]
    batched = {i for b in queue for i in b}
    return budget.ask_in_rounds(
        ctx.gate,
        ctx.team,
        requests,
        ctx.llm.distill_many,
        batches=queue,
        cost=budget.estimate_batch,
        width=llm.max_concurrency,
        free=[i for i in order if i not in batched],  # never sent: no cost
    )


def _is_raw(e: Episode | None) -> bool:
    return e is not None and e.status is EpisodeStatus.RAW


def _topics(
    learnable: Sequence[Episode],
    vectors: Mapping[str, Vector],
    entities: Mapping[str, Sequence[Mention]],
    s: DistillSettings,
) -> list[list[Episode]]:
    def named(e: Episode) -> frozenset[str]:
        return frozenset(m.key for m in entities.get(e.id, []) if m.role not in ("author", "channel"))

    messages = [Message(e, vectors[e.id], named(e)) for e in learnable if e.id in vectors]
    return topics(messages, s.topic_threshold, s.topic_max_messages, s.min_episodes)


def _worth_asking(members: Sequence[Episode], growth: float) -> bool:
    """A group the model declined before is asked again once enough messages it did not see have
    joined it: ``growth`` of the declined group's size, at least one. (Asking the same chatter again
    would get the same answer and bill for it every night the channel is busy.)"""
    seen = max((e.declined_size for e in members), default=0)
    if seen == 0:
        return True
    unseen = sum(1 for e in members if e.declined_size == 0)
    return unseen >= max(1, math.ceil(growth * seen))


def _answered(ctx: StepContext, shown: Sequence[Episode]) -> dict[str, str]:
    """The messages the shown replies answer, as the prompt quotes one outside its group ("author: text"):
    of the team, with their text still held (one read for the night)."""
    ids = sorted({e.reply_to for e in shown if e.reply_to is not None})
    found = ctx.graph.get_episodes(ids) if ids else []
    return {p.id: f"{p.author}: {p.text}" for p in found if p.team == ctx.team and p.text}


def _request(
    ctx: StepContext,
    members: Sequence[Episode],
    entities: Mapping[str, Sequence[Mention]],
    min_support: int,
    people: frozenset[str],
    answered: Mapping[str, str],
) -> DistillRequest:
    inside = {e.id for e in members}
    return DistillRequest(
        team=ctx.team,
        group_key=group_key([e.id for e in members]),
        episodes=tuple(
            EpisodeView(
                id=e.id,
                author=e.author,
                channel=e.channel,
                ts=e.ts,
                text=e.text,
                provenance=e.provenance.value,
                entities=tuple(names_of([e], entities)),
                reply_to=e.reply_to,
                answered=answered.get(e.reply_to) if e.reply_to and e.reply_to not in inside else None,
            )
            for e in members
        ),
        known_entities=tuple(sorted({m.name for e in members for m in entities.get(e.id, [])})),
        min_support=min_support,
        reference_time=ctx.now,
        people=tuple(sorted(people)),
    )


def names_of(members: Sequence[Episode], entities: Mapping[str, Sequence[Mention]]) -> list[str]:
    """The named things a group's episodes link (mentions, tags, projects, tools): named slots."""
    return sorted({m.name for e in members for m in entities.get(e.id, []) if m.role not in ("author", "channel")})


def slots_of(e: Episode, entities: Mapping[str, Sequence[Mention]], people: frozenset[str]) -> Slots:
    return slots(e.text, names_of([e], entities), people, e.author)
