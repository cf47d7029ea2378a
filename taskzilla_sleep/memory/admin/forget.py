"""Forgetting on request: one message, every message of one person ("delete my data"), or one belief.

Order, as everywhere between the two stores: the graph first, then the vectors. Each graph write is
idempotent and every decision is taken again from what the graph holds, so a crash anywhere followed
by the same request converges on what one uninterrupted run leaves:

- episodes: first their images in the archive go (a retired message's text kept for ``undo``: a
  person's request to erase reaches it too), then ``forgotten`` (text, mentions and evidence links
  dropped; a tombstone names who asked and why, never the text), then each pattern that still names
  one of them as evidence is re-scored, then their vectors are deleted (again, on a rerun);
- re-scoring uses the nightly ledger rule (``policies.ledger_confidence`` and ``status_for``): an
  active belief that falls below the floor turns tentative and gives back the episodes it absorbed.
  A belief left with no supporting episode at all is retired (archived with who and why; its wording
  came only from forgotten messages). A pinned fact keeps its state: only ``forget_pattern`` forgets it;
- a pattern: open contradictions that name it are closed (the other belief goes back from contested,
  as after "keep both"), the episodes it absorbed and still hold their text are raw again (with their
  vectors), its images leave the archive, the node is deleted and a tombstone kept. Episodes it
  absorbed that decay already retired stay retired, and the report lists them (``patterns release``
  is the way to give a wrong belief's messages back, texts included, while the archive lasts).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from taskzilla_sleep.core.errors import InputError, NotFound
from taskzilla_sleep.core.models import (
    PATTERN_LIVE,
    TEAM_RE,
    Contradiction,
    ContradictionStatus,
    Episode,
    EpisodeStatus,
    Pattern,
    PatternStatus,
    unstorable,
)
from taskzilla_sleep.core.settings import DistillSettings
from taskzilla_sleep.memory.vector_meta import episode_metadata
from taskzilla_sleep.rules.policies import Ledger, ledger_confidence, status_for
from taskzilla_sleep.stores.ports import EpisodeUpdate, Forgetting, GraphStore, PatternUpdate, VectorStore

DEFAULT_FLOOR: float = DistillSettings().confidence_floor


class Rescored(BaseModel):
    id: str
    status_before: PatternStatus
    status_after: PatternStatus
    confidence_before: float
    confidence_after: float
    support_before: int
    support_after: int


class ForgetReport(BaseModel):
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)  # lists always present

    team: str
    by: str
    reason: str
    episodes_forgotten: list[str] = Field(default_factory=list)  # by this request
    episodes_already_forgotten: list[str] = Field(default_factory=list)  # by an earlier run of it
    patterns_rescored: list[Rescored] = Field(default_factory=list)
    patterns_retired: list[str] = Field(default_factory=list)  # no supporting episode left
    patterns_forgotten: list[str] = Field(default_factory=list)
    episodes_returned: list[str] = Field(default_factory=list)  # raw again (a belief gave them back)
    episodes_not_returned: list[str] = Field(default_factory=list)  # retired by decay: no text to return
    contradictions_closed: list[str] = Field(default_factory=list)
    tombstones_written: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"forgot {len(self.episodes_forgotten)} episodes",
            f"{len(self.patterns_forgotten)} patterns",
            f"re-scored {len(self.patterns_rescored)} patterns ({len(self.patterns_retired)} retired)",
            f"returned {len(self.episodes_returned)} episodes to raw",
            f"closed {len(self.contradictions_closed)} contradictions",
            f"wrote {len(self.tombstones_written)} tombstones",
        ]
        extra = []
        if self.episodes_already_forgotten:
            extra.append(f"{len(self.episodes_already_forgotten)} episodes were already forgotten")
        if self.episodes_not_returned:
            extra.append(f"{len(self.episodes_not_returned)} absorbed episodes were already retired (text gone)")
        return ", ".join(parts) + (f"; {'; '.join(extra)}" if extra else "")


def _check(team: str, by: str, reason: str, what: str) -> tuple[str, str]:
    if not re.fullmatch(TEAM_RE, team):
        raise InputError(f"{what}: invalid team name {team!r}")
    if not by.strip():
        raise InputError(f"{what}: --by NAME is required (who asked to forget)")
    if not reason.strip():
        raise InputError(f"{what}: --reason TEXT is required (why: it is kept in the tombstone)")
    for name, value in (("--by", by), ("--reason", reason)):
        if (why := unstorable(value)) is not None:
            raise InputError(f"{what}: {name}: {why}")
    return by.strip(), reason.strip()


def forget_episode(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    episode_id: str,
    by: str,
    reason: str,
    now: datetime,
    floor: float = DEFAULT_FLOOR,
) -> ForgetReport:
    by, reason = _check(team, by, reason, "forget episode")
    found = [e for e in graph.get_episodes([episode_id]) if e.team == team]
    if not found:
        raise NotFound(f"forget episode: no episode {episode_id!r} in team {team!r}")
    return _forget_episodes(graph, vectors, team, found, by, reason, now, floor)


def forget_author(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    author: str,
    by: str,
    reason: str,
    now: datetime,
    floor: float = DEFAULT_FLOOR,
) -> ForgetReport:
    """Every episode ``author`` wrote in ``team`` (any status, author compared case-insensitively)."""
    by, reason = _check(team, by, reason, "forget author")
    if not author.strip():
        raise InputError("forget author: the author name is empty")
    found = graph.episodes_by_author(team, author.strip())
    if not found:
        raise NotFound(f"forget author: no episode by {author!r} in team {team!r}")
    return _forget_episodes(graph, vectors, team, found, by, reason, now, floor)


def _forget_episodes(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    episodes: Sequence[Episode],
    by: str,
    reason: str,
    now: datetime,
    floor: float,
) -> ForgetReport:
    report = ForgetReport(team=team, by=by, reason=reason)
    todo = [e for e in episodes if e.status is not EpisodeStatus.FORGOTTEN]
    report.episodes_forgotten = [e.id for e in todo]
    report.episodes_already_forgotten = [e.id for e in episodes if e.status is EpisodeStatus.FORGOTTEN]
    report.tombstones_written = list(report.episodes_forgotten)
    # The archive first (a retired message's text, what undo would give back): a rerun after a crash
    # finds those already forgotten too, so it purges them all the same.
    graph.forget_archived("Episode", [e.id for e in episodes])
    graph.forget_episodes([Forgetting(e.id, now, by, reason) for e in todo])
    gone = {e.id for e in episodes}
    rescore_without(graph, vectors, team, gone, by, reason, now, floor, report)
    vectors.delete(team, "episodes", sorted(gone))
    return report


def rescore_without(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    gone: set[str],
    by: str,
    reason: str,
    now: datetime,
    floor: float,
    report: ForgetReport,
    cause: str = "forgotten",
) -> None:
    """Every pattern of ``team`` that names one of ``gone`` as evidence re-scored without them (the
    ledger rule; retired when no supporting episode is left, ``cause`` saying why). Idempotent: a
    pattern re-scored names none of them any more."""
    for pid in [p.id for p in graph.patterns(team) if gone & set(p.evidence_ids)]:
        # Read again: closing a contradiction of an earlier one may have changed this one.
        for p in graph.patterns_by_id([pid]):
            _rescore(graph, vectors, p, gone, by, reason, now, floor, report, cause)


def _rescore(
    graph: GraphStore,
    vectors: VectorStore,
    p: Pattern,
    gone: set[str],
    by: str,
    reason: str,
    now: datetime,
    floor: float,
    report: ForgetReport,
    cause: str = "forgotten",
) -> None:
    left = [i for i in p.evidence_ids if i not in gone]
    known = graph.get_episodes(left)
    if p.pinned:
        after = p.model_copy(update={"evidence_ids": left, "support_count": len(set(left)), "updated_at": now})
    else:
        ledger = Ledger(
            support=len(set(left)),
            counter=p.counter_count,
            authors=len({e.author for e in known}),
            channels=len({e.channel for e in known}),
            llm_confidence=p.llm_confidence,
        )
        conf = ledger_confidence(ledger)
        status = status_for(conf, floor, p.status)
        changes: dict[str, object] = {
            "evidence_ids": left,
            "support_count": ledger.support,
            "distinct_authors": ledger.authors,
            "distinct_channels": ledger.channels,
            "confidence": conf,
            "status": status,
            "updated_at": now,
        }
        if not left and p.status in PATTERN_LIVE:
            status = PatternStatus.RETIRED
            changes |= {
                "status": status,
                "archived_by": by,
                "archived_at": now,
                "archived_reason": f"{cause}: no supporting episode left ({reason})",
                "valid_to": now,
            }
            report.patterns_retired.append(p.id)
        after = p.model_copy(update=changes)
    giving_back = []
    if p.status is PatternStatus.ACTIVE and after.status is not PatternStatus.ACTIVE:
        giving_back = [e for e in known if e.status is EpisodeStatus.ABSORBED and e.absorbed_by == p.id]
    if after.status not in PATTERN_LIVE:
        _close_contradictions(graph, p.id, by, reason, now, floor, report)
    graph.write_pattern(after, [], [_raw_again(e.id) for e in giving_back])
    report.patterns_rescored.append(
        Rescored(
            id=p.id,
            status_before=p.status,
            status_after=after.status,
            confidence_before=p.confidence,
            confidence_after=after.confidence,
            support_before=p.support_count,
            support_after=after.support_count,
        )
    )
    report.episodes_returned += [e.id for e in giving_back]
    if after.status not in PATTERN_LIVE:
        vectors.delete(p.team, "patterns", [p.id])


def _raw_again(episode_id: str) -> EpisodeUpdate:
    return EpisodeUpdate(id=episode_id, status=EpisodeStatus.RAW, schema_absorbed=0, absorbed_at=None, absorbed_by=None)


def _close_contradictions(
    graph: GraphStore,
    pattern_id: str,
    by: str,
    reason: str,
    now: datetime,
    floor: float,
    report: ForgetReport,
) -> None:
    """Close the open contradictions naming ``pattern_id``; each other belief leaves ``contested``
    unless another open contradiction still holds it (as after a "keep both")."""
    team = report.team
    open_ = graph.contradictions(team, ContradictionStatus.OPEN.value)
    mine = [c for c in open_ if pattern_id in c.pattern_ids]
    for c in mine:
        (other_id,) = [i for i in c.pattern_ids if i != pattern_id] or [pattern_id]
        others = graph.patterns_by_id([other_id])
        still_held = any(other_id in x.pattern_ids for x in open_ if x.id != c.id and x not in mine)
        status = None
        if others and others[0].status is PatternStatus.CONTESTED and not still_held:
            status = status_for(others[0].confidence, floor, PatternStatus.TENTATIVE)
        done = _closed(c, pattern_id, by, reason, now)
        graph.resolve_keep_both(
            done,
            PatternUpdate(id=pattern_id, updated_at=now),
            PatternUpdate(id=other_id, status=status, updated_at=now)
            if status is not None
            else PatternUpdate(id=other_id, updated_at=now),
        )
        report.contradictions_closed.append(c.id)


def _closed(c: Contradiction, pattern_id: str, by: str, reason: str, now: datetime) -> Contradiction:
    return c.model_copy(
        update={
            "status": ContradictionStatus.RESOLVED,
            "resolution": None,
            "resolved_by": by,
            "resolved_at": now,
            "note": f"closed: belief {pattern_id} was forgotten ({reason})",
        }
    )


def forget_pattern(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    pattern_id: str,
    by: str,
    reason: str,
    now: datetime,
    floor: float = DEFAULT_FLOOR,
) -> ForgetReport:
    """Forget one belief (a pinned fact too). Its messages are not forgotten: the ones it absorbed
    are raw again, recallable and re-embedded; they keep their distill marks, so the next nightly
    distill does not ask about them as new arrivals."""
    by, reason = _check(team, by, reason, "forget pattern")
    report = ForgetReport(team=team, by=by, reason=reason)
    found = [p for p in graph.patterns_by_id([pattern_id]) if p.team == team]
    if not found:
        done = any(t.id == pattern_id and t.kind == "pattern" and t.by for t in graph.tombstones(team))
        if not done:
            raise NotFound(f"forget pattern: no pattern {pattern_id!r} in team {team!r}")
        graph.forget_archived("Pattern", [pattern_id])
        vectors.delete(team, "patterns", [pattern_id])  # a rerun after a crash between the stores
        report.patterns_forgotten.append(pattern_id)
        return report
    p = found[0]
    _close_contradictions(graph, p.id, by, reason, now, floor, report)
    absorbed = [e for e in graph.episodes_by_status(team, [EpisodeStatus.ABSORBED.value]) if e.absorbed_by == p.id]
    report.episodes_not_returned = sorted(
        e.id for e in graph.get_episodes(p.evidence_ids) if e.absorbed_by == p.id and e.status is EpisodeStatus.RETIRED
    )
    graph.forget_archived("Pattern", [p.id])
    graph.forget_pattern(p.id, now, by, reason)
    report.patterns_forgotten.append(p.id)
    report.tombstones_written.append(p.id)
    report.episodes_returned = [e.id for e in absorbed]
    vectors.delete(team, "patterns", [p.id])
    if absorbed:
        vectors.upsert(
            team,
            "episodes",
            [e.id for e in absorbed],
            [e.text for e in absorbed],
            [episode_metadata(e) for e in absorbed],
        )
    return report
