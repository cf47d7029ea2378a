"""Undo a run, release a belief: forgetting that a person can take back while the archive lasts.

``undo RUN_ID`` puts back every item the run changed as it was before the run (the before-images
``archive/recording.py`` kept): the patterns it created are gone, the ones it bumped or contested
are as they were, the messages it absorbed are raw again and the ones it retired have their text
and vectors back, the contradictions it opened are gone and their chat alerts withdrawn (an alert
already sent gets a follow-up saying so), the watermarks are back, so the next night considers
those messages again. Runs are undone newest first: a later change that wrote an item this run
wrote built on it, and refuses the undo unless ``cascade`` undoes it (and what built on it) first.

``patterns release ID`` is a person's judgement that one belief is wrong: its absorbed messages are
raw again (a retired one with its text and vector from the archive), the belief is retired with who,
when and why. Both are recorded changes themselves, and both converge when rerun after a crash.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog
from pydantic import BaseModel, Field

from taskzilla_sleep.core.errors import Conflict, NotFound
from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import ContradictionStatus, EpisodeStatus, PatternStatus, iso_time
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.memory.vector_meta import episode_metadata, pattern_metadata
from taskzilla_sleep.stores.ports import (
    AlertRecord,
    ArchivedItem,
    ArchivedLabel,
    ChangeRecord,
    EpisodeUpdate,
    GraphStore,
    PatternUpdate,
    VectorStore,
)

log = structlog.get_logger(__name__)

BATCH = 500
# Put back in this order: what links to an entity before the entity (an entity the change created
# goes only once nothing links it).
_ORDER: dict[ArchivedLabel, int] = {
    "Contradiction": 0,
    "Pattern": 1,
    "Tombstone": 2,
    "Episode": 3,
    "Meta": 4,
    "Entity": 5,
}


class UndoRefused(Conflict):
    """Later changes built on the run: undo them first (newest first), or ask for ``cascade``."""

    def __init__(self, message: str, later: Sequence[ChangeRecord]) -> None:
        super().__init__(message)
        self.later = list(later)


class UndoReport(BaseModel):
    """What an undo did (or, dry, would do)."""

    run_id: str
    undone: list[str] = Field(default_factory=list)  # changes undone, newest first (the run asked for last)
    already: bool = False  # it had been undone before: nothing changed
    restored: int = 0  # items put back as they were before
    removed: int = 0  # items the undone changes had created, removed
    texts: int = 0  # retired or pruned messages given their text (and vector) back
    alerts_withdrawn: int = 0  # chat alerts not sent yet, dropped
    notices: int = 0  # follow-ups queued for alerts already sent
    teams: list[str] = Field(default_factory=list)
    dry_run: bool = False

    def summary(self) -> str:
        if self.already:
            return f"{self.run_id} was already undone: nothing changed"
        verb = "would undo" if self.dry_run else "undid"
        runs = ", ".join(self.undone)
        return (
            f"{verb} {runs}: {self.restored} items put back as they were, {self.removed} created items removed, "
            f"{self.texts} messages given their text back, {self.alerts_withdrawn} alerts withdrawn, "
            f"{self.notices} follow-ups queued for alerts already sent"
        )


def change_line(c: ChangeRecord) -> str:
    what = {"run": "run", "resolve": "resolve", "release": "release"}[c.kind]
    return f"{c.id} ({what} by {c.by}, {iso_time(c.recorded_at)})"


def plan_undo(graph: GraphStore, run_id: str, cascade: bool) -> list[ChangeRecord]:
    """The changes an undo of ``run_id`` takes back, newest first (empty: it was undone already).
    Refused (``UndoRefused``) when later changes built on it and ``cascade`` is off."""
    change = graph.get_change(run_id)
    if change is None:
        if graph.get_run(run_id) is None:
            raise NotFound(f"no run with id {run_id!r} (see `taskzilla-sleep report` or the console's Nights page)")
        raise Conflict(
            f"run {run_id} left nothing to undo: it changed nothing, or it ran with decay.archive_days 0 "
            "(nothing archived)"
        )
    if change.undone_at is not None:
        return []
    _check_kept(change)
    chosen: dict[str, ChangeRecord] = {change.id: change}
    todo = [change]
    while todo:
        for later in graph.later_changes(todo.pop().id):
            if later.id not in chosen:
                _check_kept(later)
                chosen[later.id] = later
                todo.append(later)
    others = sorted((c for c in chosen.values() if c.id != change.id), key=lambda c: (c.seq, c.id))
    if others and not cascade:
        listed = "; ".join(change_line(c) for c in reversed(others))
        raise UndoRefused(
            f"undo {run_id}: {len(others)} later change(s) built on it, newest first: {listed}. "
            "Undo them first, newest first, or add --cascade to undo them with it",
            others,
        )
    return sorted(chosen.values(), key=lambda c: (c.seq, c.id), reverse=True)


def _check_kept(c: ChangeRecord) -> None:
    if c.purged_at is not None:
        raise Conflict(
            f"{c.id}: its archive was purged on {iso_time(c.purged_at)} (decay.archive_days): "
            "it can no longer be undone"
        )


@dataclass
class UndoContext:
    graph: GraphStore
    vectors: VectorStore
    now: datetime
    by: str
    reason: str
    # Rewrites the memory index of these teams once the stores are back (the night's own rebuild).
    rebuild_index: Callable[[Sequence[str]], object] = lambda teams: None
    report: UndoReport = field(default_factory=lambda: UndoReport(run_id=""))


def undo_run(
    graph: GraphStore,
    vectors: VectorStore,
    run_id: str,
    by: str,
    reason: str,
    now: datetime,
    *,
    cascade: bool = False,
    dry_run: bool = False,
    rebuild_index: Callable[[Sequence[str]], object] = lambda teams: None,
) -> UndoReport:
    """Undo ``run_id`` (and, with ``cascade``, every later change that built on it, newest first).
    Rerun after a crash, it finishes what the interrupted undo left: every write converges."""
    order = plan_undo(graph, run_id, cascade)
    report = UndoReport(run_id=run_id, dry_run=dry_run, already=not order)
    ctx = UndoContext(graph, vectors, now, by, reason, rebuild_index, report)
    teams: set[str] = set()
    for change in order:
        items = graph.archived_items(change.id)
        teams |= {a.team for a in items}
        report.undone.append(change.id)
        report.restored += sum(1 for a in items if a.existed)
        report.removed += sum(1 for a in items if not a.existed)
        report.texts += sum(1 for a in items if a.label == "Episode" and a.text is not None)
        if not dry_run:
            _undo_one(ctx, change, items)
    report.teams = sorted(teams)
    if order and not dry_run:
        rebuild_index(report.teams)
        log.info("undo_finished", run_id=run_id, undone=len(order), restored=report.restored, removed=report.removed)
    return report


def _undo_one(ctx: UndoContext, change: ChangeRecord, items: Sequence[ArchivedItem]) -> None:
    g = ctx.graph
    created = [a.key for a in items if a.label == "Contradiction" and not a.existed]
    withdrawn, notices = withdraw_alerts(g, created, change, ctx.by, ctx.reason, ctx.now)
    ctx.report.alerts_withdrawn += withdrawn
    ctx.report.notices += notices
    crashpoint("undo.after_alerts")
    ordered = sorted(items, key=lambda a: (_ORDER[a.label], a.key))
    for i in range(0, len(ordered), BATCH):
        g.restore_archived(ordered[i : i + BATCH])
        crashpoint("undo.after_graph_batch")
    sync_vectors(g, ctx.vectors, items)
    crashpoint("undo.after_vectors")
    g.mark_undone(change.id, ctx.now, ctx.by, ctx.reason)
    if change.kind == "run":
        run = g.get_run(change.id)
        if run is not None and run.undone_at is None:
            g.save_run(run.model_copy(update={"undone_at": ctx.now, "undone_by": ctx.by, "undo_reason": ctx.reason}))
    log.info("change_undone", change=change.id, kind=change.kind, items=len(items), by=ctx.by)


def sync_vectors(graph: GraphStore, vectors: VectorStore, items: Sequence[ArchivedItem]) -> None:
    """The vectors of the items put back follow the graph: a live item has one (a pattern re-embedded:
    its statement may be back to an older one), anything else has none."""
    for team in sorted({a.team for a in items}):
        eids = sorted({a.key for a in items if a.team == team and a.label == "Episode"})
        if eids:
            live = graph.live_texts(team, "episode", eids)
            present = vectors.present(team, "episodes", eids)
            todo = [e for e in graph.get_episodes(sorted(set(live) - present)) if e.id in live]
            if todo:
                vectors.upsert(
                    team,
                    "episodes",
                    [e.id for e in todo],
                    [live[e.id] for e in todo],
                    [episode_metadata(e) for e in todo],
                )
            gone = sorted(present - set(live))
            if gone:
                vectors.delete(team, "episodes", gone)
        pids = sorted({a.key for a in items if a.team == team and a.label == "Pattern"})
        if pids:
            live = graph.live_texts(team, "pattern", pids)
            found = graph.patterns_by_id(sorted(live))
            if found:
                vectors.upsert(
                    team,
                    "patterns",
                    [p.id for p in found],
                    [live[p.id] for p in found],
                    [pattern_metadata(p) for p in found],
                )
            gone = sorted(vectors.present(team, "patterns", pids) - set(live))
            if gone:
                vectors.delete(team, "patterns", gone)


def withdraw_alerts(
    graph: GraphStore, contradictions: Sequence[str], change: ChangeRecord, by: str, reason: str, now: datetime
) -> tuple[int, int]:
    """The chat alerts of contradictions an undo takes back: one already sent gets a follow-up saying
    it was withdrawn; then each is re-keyed (so the same contradiction, opened again by a later night,
    gets an alert of its own) and, if not sent yet, dropped. Returns (dropped, follow-ups queued)."""
    if not contradictions:
        return 0, 0
    from taskzilla_sleep.alerts.message import format_withdrawal
    from taskzilla_sleep.alerts.outbox import WITHDRAWN

    wanted = set(contradictions)
    mine = [a for a in graph.alerts() if a.kind == "contradiction" and a.contradiction_id in wanted]
    suffix = f"{WITHDRAWN}{change.id}"
    notices: list[AlertRecord] = []
    for a in mine:
        if a.status != "delivered":
            continue
        base = a.key.split(WITHDRAWN)[0]
        payload = format_withdrawal(a, change.id, by, reason, now).model_dump_json()
        notices.append(
            AlertRecord(
                key=f"{base}{suffix}:notice",
                channel=a.channel,
                channel_kind=a.channel_kind,
                kind="resolution",
                team=a.team,
                contradiction_id=a.contradiction_id,
                payload_json=payload,
                next_attempt_at=now,
                created_at=now,
            )
        )
    if notices:
        graph.queue_alerts(notices)
    fresh = [a for a in mine if WITHDRAWN not in a.key]
    dropped = sum(1 for a in fresh if a.status == "pending")
    if fresh:
        why = f"withdrawn: {change.id} was undone by {by} ({reason})"
        graph.withdraw_alerts([a.key for a in fresh], suffix, why)
    return dropped, len(notices)


# -- release ------------------------------------------------------------------------------------------


class ReleaseReport(BaseModel):
    pattern_id: str
    team: str
    statement: str
    given_back: list[str] = Field(default_factory=list)  # absorbed messages raw again
    revived: list[str] = Field(default_factory=list)  # retired messages raw again, text from the archive
    text_gone: list[str] = Field(default_factory=list)  # retired messages whose archive was purged: still retired
    already: bool = False

    def summary(self) -> str:
        head = f"released {self.pattern_id} ({self.statement!r})"
        if self.already:
            head = f"{self.pattern_id} was already released"
        parts = [
            f"{len(self.given_back)} absorbed messages raw again",
            f"{len(self.revived)} retired messages restored",
        ]
        if self.text_gone:
            parts.append(f"{len(self.text_gone)} retired messages whose archive was purged stay retired")
        return f"{head}: " + ", ".join(parts)


def release_change_id(pattern_id: str) -> str:
    return "rel_" + hashlib.sha256(pattern_id.encode()).hexdigest()[:16]


def release_pattern(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    pattern_id: str,
    by: str,
    reason: str,
    now: datetime,
    rebuild_index: Callable[[Sequence[str]], object] = lambda teams: None,
) -> ReleaseReport:
    """A person judged the belief wrong: its messages back to raw (texts from the archive), the belief
    retired with who, when and why. A repeat (or a rerun after a crash) finishes what is left."""
    found = [p for p in graph.patterns_by_id([pattern_id]) if p.team == team]
    if not found:
        raise NotFound(
            f"no pattern {pattern_id!r} in team {team!r} (see `taskzilla-sleep patterns list --team {team}`)"
        )
    p = found[0]
    if p.pinned:
        raise Conflict(f"{pattern_id} is a pinned fact: unpin it instead (`taskzilla-sleep facts unpin {pattern_id}`)")
    released = p.status is PatternStatus.RETIRED and (p.archived_reason or "").startswith("released by ")
    if p.status not in (PatternStatus.ACTIVE, PatternStatus.TENTATIVE) and not released:
        raise Conflict(f"{pattern_id} is {p.status.value}: only an active or tentative belief can be released")
    disputes = [c.id for c in graph.contradictions(team, ContradictionStatus.OPEN.value) if pattern_id in c.pattern_ids]
    if disputes:
        raise Conflict(f"{pattern_id} is in open contradiction {', '.join(disputes)}: resolve it first")
    change = graph.get_change(release_change_id(pattern_id)) or ChangeRecord(
        id=release_change_id(pattern_id),
        kind="release",
        at=now,
        recorded_at=datetime.now(UTC),
        seq=time.time_ns(),
        by=by,
    )
    g = recorded(graph, change, team)
    absorbed = [
        e for e in graph.episodes_by_status(team, [EpisodeStatus.ABSORBED.value]) if e.absorbed_by == pattern_id
    ]
    retired = [e for e in graph.episodes_by_status(team, [EpisodeStatus.RETIRED.value]) if e.absorbed_by == pattern_id]
    texts = graph.archived_texts([e.id for e in retired])
    report = ReleaseReport(pattern_id=pattern_id, team=team, statement=p.statement, already=released)
    report.given_back = [e.id for e in absorbed]
    report.revived = [e.id for e in retired if e.id in texts]
    report.text_gone = [e.id for e in retired if e.id not in texts]
    g.update_episodes(
        [
            EpisodeUpdate(id=e.id, status=EpisodeStatus.RAW, schema_absorbed=0, absorbed_at=None, absorbed_by=None)
            for e in absorbed
        ]
    )
    if report.revived:
        g.revive_episodes({i: texts[i] for i in report.revived})
    if not released:
        g.update_patterns(
            [
                PatternUpdate(
                    id=pattern_id,
                    status=PatternStatus.RETIRED,
                    updated_at=now,
                    archived_by=by,
                    archived_at=now,
                    archived_reason=f"released by {by}: {reason}",
                    valid_to=now,
                )
            ]
        )
    crashpoint("release.after_graph")
    sync_vectors(graph, vectors, graph.archived_items(change.id))
    rebuild_index([team])
    log.info(
        "pattern_released", pattern_id=pattern_id, team=team, by=by, raw=len(absorbed), revived=len(report.revived)
    )
    return report
