"""Read-only views of a team's beliefs: what `patterns list` and `patterns show` print."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from taskzilla_sleep.core.errors import InputError, NotFound
from taskzilla_sleep.core.models import (
    Contradiction,
    EpisodeStatus,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
    RunTrigger,
    Time,
)
from taskzilla_sleep.stores.ports import GraphStore

# The ledger keeps counts per step, not the ids a run touched; a run whose clock (``now``) is one of
# the pattern's own times is the run that wrote it. This many newest runs are searched.
RUNS_SEARCHED = 1000


class PatternSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    statement: str
    kind: PatternKind
    status: PatternStatus
    confidence: float
    support_count: int
    pinned: bool
    topic: str
    updated_at: Time

    @classmethod
    def of(cls, p: Pattern) -> PatternSummary:
        return cls(
            id=p.id,
            statement=p.statement,
            kind=p.kind,
            status=p.status,
            confidence=p.confidence,
            support_count=p.support_count,
            pinned=p.pinned,
            topic=p.topic,
            updated_at=p.updated_at,
        )


class EvidenceEpisode(BaseModel):
    """A supporting message; ``text`` is empty once decay, prune or a person's request dropped it."""

    id: str
    author: str
    channel: str
    ts: Time
    provenance: Provenance
    status: EpisodeStatus
    text: str


class LinkView(BaseModel):
    relation: str  # REFINES, COMPATIBLE_WITH, UNRELATED_TO, MERGED_INTO, SUPERSEDES
    direction: str  # "out": this pattern -> other; "in": other -> this pattern
    other: str


class RunRef(BaseModel):
    id: str
    trigger: RunTrigger
    now: Time
    what: list[str]  # which of the pattern's times the run's clock matches (created, updated, archived)


class PatternDetail(BaseModel):
    pattern: Pattern
    evidence: list[EvidenceEpisode]
    missing_evidence: list[str]  # ids the pattern names that the graph no longer holds
    contradictions: list[Contradiction]
    links: list[LinkView]
    runs: list[RunRef]


def list_patterns(
    graph: GraphStore, team: str, status: PatternStatus | None = None, limit: int = 50, offset: int = 0
) -> list[PatternSummary]:
    """The team's patterns (of ``status``), oldest first, a page of ``limit`` from ``offset``."""
    if limit < 1 or offset < 0:
        raise InputError(f"patterns list: limit must be at least 1 and offset at least 0 (got {limit}, {offset})")
    found = [p for p in graph.patterns(team) if status is None or p.status is status]
    return [PatternSummary.of(p) for p in found[offset : offset + limit]]


def show_pattern(graph: GraphStore, team: str, pattern_id: str) -> PatternDetail:
    """One pattern with its evidence, contradictions, links and the runs that wrote it; a pattern of
    another team is NotFound, like an unknown id."""
    found = graph.patterns_by_id([pattern_id])
    if not found or found[0].team != team:
        raise NotFound(f"no pattern {pattern_id!r} in team {team!r} (see `taskzilla-sleep patterns list`)")
    p = found[0]
    eps = {e.id: e for e in graph.get_episodes(p.evidence_ids)}
    evidence = [
        EvidenceEpisode(
            id=e.id,
            author=e.author,
            channel=e.channel,
            ts=e.ts,
            provenance=e.provenance,
            status=e.status,
            text=e.text,
        )
        for e in sorted(eps.values(), key=lambda e: (e.ts, e.id))
    ]
    links = [
        LinkView(relation=lk.relation, direction="out" if lk.a == p.id else "in", other=lk.b if lk.a == p.id else lk.a)
        for lk in graph.pattern_links(team)
        if p.id in (lk.a, lk.b)
    ]
    times = {"created": p.created_at, "updated": p.updated_at, "archived": p.archived_at}
    runs = []
    for r in graph.runs(RUNS_SEARCHED):
        what = [k for k, t in times.items() if t is not None and t == r.now and not r.dry_run]
        if what:
            runs.append(RunRef(id=r.id, trigger=r.trigger, now=r.now, what=what))
    return PatternDetail(
        pattern=p,
        evidence=evidence,
        missing_evidence=sorted(set(p.evidence_ids) - set(eps)),
        contradictions=[c for c in graph.contradictions(team) if p.id in c.pattern_ids],
        links=links,
        runs=runs,
    )
