"""The human loop: only a person's resolution supersedes a belief. ``resolve`` is the one way a
contradiction gets resolved, whoever asks (API, MCP, command line, console, chat).

keep new -> the old belief is superseded: archived with who, when and why, a SUPERSEDES link from
the winner, its vector removed. keep old -> the new one is archived the same way. keep both ->
both go back to active (or tentative, by their confidence) and the note is kept. A pinned fact is
never superseded. Resolving a closed contradiction again the same way (the same keep, and the same
note or none) changes nothing and returns the recorded resolution, so a retried request is harmless;
another decision is refused (Conflict).

The decision's writes are archived as a change of their own (an undo of the night that opened the
contradiction names it as built on that night). Then every chat alert already delivered about it is
answered through the outbox ("resolved by … : kept new"): durable, retried per channel, at least
once. The answer is keyed by the contradiction and the channel, so repeating the same resolution (a
retried request, a second click) queues nothing new, and a repeat after a crash between the two
writes queues the answer the crash lost.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.core.errors import Conflict, InputError, StoreError
from taskzilla_sleep.core.models import (
    Contradiction,
    ContradictionKind,
    ContradictionStatus,
    Pattern,
    PatternStatus,
    to_ms,
    unstorable,
)
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.rules.policies import status_for
from taskzilla_sleep.rules.resolution import KEEP_CHOICES as KEEP_CHOICES
from taskzilla_sleep.rules.resolution import Keep as Keep
from taskzilla_sleep.rules.resolution import resolve_command
from taskzilla_sleep.stores.ports import ChangeRecord, GraphStore, PatternUpdate, VectorStore

log = structlog.get_logger(__name__)


def describe(c: Contradiction, beliefs: Mapping[str, Pattern]) -> list[str]:
    """One contradiction as `contradictions list` shows it: both beliefs, and how to resolve it."""
    old, new = beliefs.get(c.old_pattern_id), beliefs.get(c.new_pattern_id)
    what = "a change to confirm" if c.kind is ContradictionKind.UPDATE else "people disagree"
    lines = [
        f"{c.id} [{c.status.value}, {c.kind.value}: {what}] opened {c.opened_at.isoformat()} ({c.team})",
        f"  old: {old.statement if old else c.old_pattern_id} ({old.support_count if old else 0} episodes)",
        f"  new: {new.statement if new else c.new_pattern_id} ({new.support_count if new else 0} episodes)",
    ]
    if c.status is ContradictionStatus.RESOLVED:
        what = f"kept {c.resolution}" if c.resolution else "closed"  # closed: one belief was forgotten
        lines.append(f"  resolved: {what} by {c.resolved_by}" + (f" — {c.note}" if c.note else ""))
        return lines
    if c.kind is ContradictionKind.UPDATE:
        lines.append(f"  confirm: {resolve_command(c.id, keep='new')}")
    lines.append(f"  resolve: {resolve_command(c.id)}")
    return lines


@dataclass(frozen=True)
class _Decision:
    """What a person decided on a contradiction (``resolve``'s arguments)."""

    cid: str
    keep: Keep
    by: str
    note: str | None
    now: datetime
    floor: float


def resolve(
    graph: GraphStore,
    vectors: VectorStore,
    cid: str,
    keep: Keep,
    by: str,
    note: str | None,
    now: datetime,
    floor: float,
) -> Contradiction:
    """Apply a person's decision on ``cid`` (``keep``, ``by``, ``note``; ``floor``: the confidence a
    surviving contested belief needs to be active), archived as a change of its own, and queue the
    answers to its delivered chat alerts."""
    change = ChangeRecord(
        id="res_" + hashlib.sha256(f"{cid}|{to_ms(now)}".encode()).hexdigest()[:16],
        kind="resolve",
        at=now,
        recorded_at=datetime.now(UTC),
        seq=time.time_ns(),
        by=by.strip() or "unknown",
    )
    team = graph.get_contradiction(cid).team
    done = _apply(recorded(graph, change, team), vectors, _Decision(cid, keep, by, note, now, floor))
    try:
        Outbox(graph).answer_resolution(done, now)
    except StoreError as exc:
        # The decision stands; only the chat answer is missing (repeating the resolve queues it).
        log.error("resolution_answer_not_queued", contradiction_id=cid, error=str(exc)[:200])
    return done


def _apply(graph: GraphStore, vectors: VectorStore, d: _Decision) -> Contradiction:
    """The decision's writes (``graph``: recorded into the resolution's change), after its checks."""
    cid, keep, by, note, now, floor = d.cid, d.keep, d.by, d.note, d.now, d.floor
    if not by.strip():
        raise InputError("resolve: --by NAME is required (who decided)")
    for what, value in (("--by", by), ("--note", note or "")):
        if (why := unstorable(value)) is not None:
            raise InputError(f"resolve: {what}: {why}")
    c = graph.get_contradiction(cid)
    if resolved_the_same_way(c, keep, note):
        return c
    if c.status is ContradictionStatus.RESOLVED:
        raise Conflict(
            f"contradiction {cid} is already resolved (kept {c.resolution}, by {c.resolved_by} at "
            f"{c.resolved_at.isoformat() if c.resolved_at else '?'}); nothing changed"
        )
    pats = {p.id: p for p in graph.patterns_by_id([c.old_pattern_id, c.new_pattern_id])}
    old, new = pats.get(c.old_pattern_id), pats.get(c.new_pattern_id)
    if old is None or new is None:
        raise Conflict(f"contradiction {cid} refers to a belief that no longer exists")
    done = c.model_copy(
        update={
            "status": ContradictionStatus.RESOLVED,
            "resolution": keep,
            "resolved_by": by.strip(),
            "resolved_at": now,
            "note": note,
        }
    )
    why = note or f"contradiction {cid} resolved by {by.strip()}: keep {keep}"
    if keep == "both":
        graph.resolve_keep_both(
            done,
            PatternUpdate(id=old.id, status=_back(old, floor), updated_at=now),
            PatternUpdate(id=new.id, status=_back(new, floor), updated_at=now),
        )
        return done
    winner, loser = (new, old) if keep == "new" else (old, new)
    if loser.pinned:
        raise Conflict(f"{loser.id} is a pinned fact and cannot be superseded; unpin it first (`facts unpin`)")
    archived = loser.model_copy(
        update={
            "status": PatternStatus.SUPERSEDED,
            "superseded_by": winner.id,
            "archived_by": by.strip(),
            "archived_at": now,
            "archived_reason": why,
            "valid_to": now,
            "updated_at": now,
        }
    )
    won = winner.model_copy(update={"status": _back(winner, floor), "updated_at": now})
    # Graph first (one atomic write), then the loser's vector leaves Chroma.
    graph.resolve_supersede(done, won, archived)
    vectors.delete(c.team, "patterns", [loser.id])
    return done


def resolved_the_same_way(c: Contradiction, keep: str, note: str | None) -> bool:
    """Whether ``c`` is already resolved with ``keep`` (and ``note``, when one is given): a repeat, not a conflict."""
    return c.status is ContradictionStatus.RESOLVED and c.resolution == keep and note in (None, c.note)


def _back(p: Pattern, floor: float) -> PatternStatus:
    """A contested belief that survives goes back to active or tentative by its confidence."""
    if p.status is not PatternStatus.CONTESTED:
        return p.status
    return status_for(p.confidence, floor, PatternStatus.TENTATIVE)
