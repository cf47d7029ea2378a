"""The one way a contradiction gets resolved, whoever asks (API, MCP, command line, console, chat).

A person's decision is applied (``contradictions.resolve``), then every chat alert already
delivered about it is answered through the outbox ("resolved by … : kept new"): durable, retried
per channel, at least once. The answer is keyed by the contradiction and the channel, so repeating
the same resolution (a retried request, a second click) queues nothing new, and a repeat after a
crash between the two writes queues the answer the crash lost.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime

import structlog

from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.models import Contradiction, to_ms
from taskzilla_sleep.memory import contradictions as human_loop
from taskzilla_sleep.memory.archive.recording import recorded
from taskzilla_sleep.memory.contradictions import Keep
from taskzilla_sleep.stores.ports import ChangeRecord, GraphStore, VectorStore

log = structlog.get_logger(__name__)


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
    """Resolve ``cid`` (see ``contradictions.resolve`` for the rules) and queue the answers to its alerts.
    The decision's writes are archived first, as a change of its own (an undo of the night that
    opened the contradiction names it as built on that night)."""
    change = ChangeRecord(
        id="res_" + hashlib.sha256(f"{cid}|{to_ms(now)}".encode()).hexdigest()[:16],
        kind="resolve",
        at=now,
        recorded_at=datetime.now(UTC),
        seq=time.time_ns(),
        by=by.strip() or "unknown",
    )
    team = graph.get_contradiction(cid).team
    done = human_loop.resolve(recorded(graph, change, team), vectors, cid, keep, by, note, now, floor)
    try:
        Outbox(graph).answer_resolution(done, now)
    except StoreError as exc:
        # The decision stands; only the chat answer is missing (repeating the resolve queues it).
        log.error("resolution_answer_not_queued", contradiction_id=cid, error=str(exc)[:200])
    return done
