"""03:10 distill: recent raw episodes -> patterns with a ledger-based confidence.

Plan: read raw, learnable episodes of the window, group them (embedding similarity + shared
entities), ask the model about each group that holds at least one episode newer than the
watermark, match each answer against existing patterns (evidence overlap or statement
similarity -> bump instead of duplicate), then rescore every live pattern from its ledger.
Apply: per pattern ONE graph write (pattern + evidence links + absorption), then the vectors
of the patterns written (one call), then the watermark. A crash anywhere is repaired by
rerunning: pattern ids are derived from their supporting episodes, writes are MERGEs, and the run
starts with a reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import structlog

from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.llm.base import DistillRequest, EpisodeView, PatternDraft
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
    Candidate,
    Ledger,
    distinct_texts,
    group_episodes,
    is_learnable,
    ledger_confidence,
    main_channel,
    pattern_id,
    status_for,
    topic_for,
)
from taskzilla_sleep.steps.base import StepContext, one_line
from taskzilla_sleep.stores.cypher import CypherGraphStore

log = structlog.get_logger(__name__)

WATERMARK = "distill_watermark:{team}"
LAST_DISTILL = "last_distill_at:{team}"  # nightly or watchdog: the watchdog's cooldown counts from it


@dataclass
class PatternChange:
    pattern: Pattern
    action: str  # "add" | "bump" | "rescore"
    subject_keys: list[str]
    absorb: list[str]  # episode ids to absorb into this pattern
    unabsorb: list[str]  # episode ids to give back (pattern fell below the floor)
    before: Pattern | None = None


@dataclass
class DistillPlan:
    team: str
    now: datetime
    step: str = "distill"
    changes: list[PatternChange] = field(default_factory=list)
    groups: int = 0
    skipped_groups: int = 0
    pinned_matches: int = 0
    episodes_read: int = 0
    new_episodes: int = 0

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
            "pinned_matches": self.pinned_matches,
        }

    def empty(self) -> bool:
        return not self.changes


def read_watermark(ctx: StepContext) -> datetime | None:
    raw = ctx.graph.get_meta(WATERMARK.format(team=ctx.team))
    return from_ms(int(raw)) if raw else None


def last_distill(graph: CypherGraphStore, team: str) -> datetime | None:
    """The clock time of the last distill (nightly or watchdog) of ``team``: what the watchdog counts from."""
    raw = graph.get_meta(LAST_DISTILL.format(team=team))
    return from_ms(int(raw)) if raw else None


def plan(ctx: StepContext) -> DistillPlan:
    """``ctx.lookback`` set: a watchdog distill over that window only.

    A group goes to the model only when it holds something new: for the night, an episode after the
    distill watermark; for the watchdog, an episode ingested since the last distill (nightly or
    watchdog — what the watchdog's trigger counts). A lookback group with nothing new was in the
    stores at the last distill; asking again would spend a call on what the model already saw, and
    the night re-reads the whole window anyway.
    """
    lookback = ctx.lookback
    s = ctx.settings.distill
    p = DistillPlan(team=ctx.team, now=ctx.now)
    watermark = read_watermark(ctx)
    window = lookback or timedelta(days=s.window_days)
    episodes = ctx.graph.episodes_in_window(ctx.team, [EpisodeStatus.RAW.value], ctx.now - window, ctx.now)
    learnable = distinct_texts([e for e in episodes if is_learnable(e)])
    p.episodes_read = len(episodes)
    is_new: Callable[[Episode], bool]
    if lookback is not None:
        last = last_distill(ctx.graph, ctx.team)
        is_new = (lambda e: True) if last is None else (lambda e: e.ingested_at > last)  # noqa: E731
    else:
        is_new = (lambda e: True) if watermark is None else (lambda e: e.ts > watermark)  # noqa: E731
    p.new_episodes = sum(1 for e in learnable if is_new(e))

    patterns = {x.id: x for x in ctx.graph.patterns(ctx.team)}
    live = {i: x for i, x in patterns.items() if x.status in PATTERN_LIVE}
    evidence_eps = _episodes_by_id(ctx, {eid for x in live.values() for eid in x.evidence_ids})

    drafts: list[tuple[list[Episode], PatternDraft | None]] = []
    if p.new_episodes:
        vecs = ctx.vectors_of("episodes", [e.id for e in learnable])
        ents = ctx.graph.episode_entities([e.id for e in learnable])
        cands = [
            Candidate(
                e,
                vecs[e.id].tolist(),
                frozenset(r["key"] for r in ents.get(e.id, []) if r["role"] not in ("author", "channel")),
            )
            for e in learnable
            if e.id in vecs
        ]
        groups = [
            g
            for g in group_episodes(cands, s.similarity_threshold, min_size=s.min_episodes)
            if any(is_new(c.episode) for c in g.members)
        ]
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
                known_entities=tuple(sorted({r["name"] for c in g.members for r in ents.get(c.episode.id, [])})),
                min_support=s.min_episodes,
            )
            for g in groups
        ]
        answers = ctx.llm.distill_many(requests)
        drafts = [([c.episode for c in g.members], a) for g, a in zip(groups, answers, strict=True)]
    else:
        ents = {}

    working: dict[str, Pattern] = dict(live)
    changes: dict[str, PatternChange] = {}
    pvecs = ctx.vectors_of("patterns", list(live)) if drafts else {}
    for members, draft in drafts:
        if draft is None:
            p.skipped_groups += 1
            continue
        by_id = {e.id: e for e in members}
        support = sorted(set(draft.supporting_ids))
        for e in (by_id[i] for i in support):
            evidence_eps[e.id] = e
        target = _match(ctx, draft, support, working, pvecs)
        if target is not None and target.pinned:
            p.pinned_matches += 1  # pinned facts are immune: never bumped, merged or rewritten
            continue
        # Subjects resolve against the group's own entities only: the same group always gives the
        # same links, whatever else is in the window (a rerun after a crash sees fewer raw episodes).
        entity_index = _entity_index({e.id: ents.get(e.id, []) for e in members})
        subjects = [entity_index[s.casefold()] for s in draft.subjects if s.casefold() in entity_index]
        subject_keys = sorted({r["key"] for r in subjects})
        if target is None:
            pid = pattern_id(ctx.team, support)
            kinds = {r["name"]: r["kind"] for r in subjects}
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
                subjects=sorted({r["name"] for r in subjects}),
                topic=topic_for([r["name"] for r in subjects], kinds, channel, draft.kind.value),
                availability_lag_s=_lag(ctx, [by_id[i] for i in support], s.min_episodes),
            )
            working[pid] = new
            changes[pid] = PatternChange(new, "add", subject_keys, [], [])
            pvecs[pid] = np.asarray(ctx.embedder.embed([new.statement])[0], dtype=np.float64)
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
        absorb = sorted(
            i
            for i in updated.evidence_ids
            if absorbing and i in evidence_eps and evidence_eps[i].status is EpisodeStatus.RAW
        )
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
    p.changes = [changes[k] for k in sorted(changes, key=lambda k: (changes[k].action != "add", k))]
    return p


_KIND_RANK = {"project": 0, "tool": 1, "topic": 2, "person": 3, "channel": 4}


def _entity_index(ents: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Subject name -> entity. One name can be several entities (#ops the tag, ops the channel):
    prefer project, tool, topic, person, channel, then the key — never the order rows came back in."""
    best: dict[str, dict[str, Any]] = {}
    for rows in ents.values():
        for r in rows:
            name = r["name"].casefold()
            cur = best.get(name)
            rank = (_KIND_RANK.get(r["kind"], 9), r["key"])
            if cur is None or rank < (_KIND_RANK.get(cur["kind"], 9), cur["key"]):
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
) -> Pattern | None:
    """An existing pattern this draft restates: evidence overlap ≥ half, or statement similarity ≥ match_threshold."""
    sup = set(support)
    best: tuple[float, str] | None = None
    for pid, pat in working.items():
        overlap = len(sup & set(pat.evidence_ids)) / max(1, len(sup))
        if overlap >= 0.5:
            score = 2.0 + overlap
            if best is None or score > best[0]:
                best = (score, pid)
    if best is None and pvecs:
        q = np.asarray(ctx.embedder.embed([draft.statement])[0], dtype=np.float64)
        ids = [i for i in pvecs if i in working]
        if ids:
            sims = np.stack([pvecs[i] for i in ids]) @ q
            k = int(np.argmax(sims))
            if float(sims[k]) >= ctx.settings.distill.match_threshold:
                best = (float(sims[k]), ids[k])
    return working[best[1]] if best else None


def apply(ctx: StepContext, plan: DistillPlan) -> dict[str, int]:
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
    crashpoint("distill.before_watermark")
    # The watermark moves last: a crash before it means the next run re-reads the same episodes. A
    # watchdog distill (lookback) leaves the nightly watermark alone: the night still reads the day.
    if ctx.lookback is None:
        ctx.graph.set_meta(WATERMARK.format(team=ctx.team), str(to_ms(ctx.now)))
    ctx.graph.set_meta(LAST_DISTILL.format(team=ctx.team), str(to_ms(ctx.now)))
    return plan.counts()


def _write_patterns(ctx: StepContext, plan: DistillPlan, written: list[Pattern]) -> None:
    now_ms = to_ms(ctx.now)
    for c in plan.changes:
        ctx.check_stop()
        pat = c.pattern
        evidence: list[dict[str, Any]] = [{"id": i, "set": {}} for i in pat.evidence_ids]
        sets = {
            i: {"status": "absorbed", "schema_absorbed": 1, "absorbed_at": now_ms, "absorbed_by": pat.id}
            for i in c.absorb
        }
        sets.update(
            {i: {"status": "raw", "schema_absorbed": 0, "absorbed_at": None, "absorbed_by": None} for i in c.unabsorb}
        )
        for row in evidence:
            row["set"] = sets.pop(row["id"], {})
        evidence += [{"id": i, "set": s} for i, s in sets.items()]
        ctx.graph.write_pattern(pat, c.subject_keys, evidence)
        written.append(pat)
        crashpoint("distill.after_pattern_graph")
