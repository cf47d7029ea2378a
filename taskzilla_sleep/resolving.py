"""The one way a contradiction gets resolved, whoever asks (API, MCP, command line, console, chat).

A person's decision is applied (``contradictions.resolve``), then every chat alert already
delivered about it is answered through the outbox ("resolved by … : kept new"): durable, retried
per channel, at least once. The answer is keyed by the contradiction and the channel, so repeating
the same resolution (a retried request, a second click) queues nothing new, and a repeat after a
crash between the two writes queues the answer the crash lost.
"""

from __future__ import annotations

from datetime import datetime

import structlog

from taskzilla_sleep import contradictions as human_loop
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.contradictions import Keep
from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.models import Contradiction
from taskzilla_sleep.stores.ports import GraphStore, VectorStore

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
    """Resolve ``cid`` (see ``contradictions.resolve`` for the rules) and queue the answers to its alerts."""
    done = human_loop.resolve(graph, vectors, cid, keep, by, note, now, floor)
    try:
        Outbox(graph).answer_resolution(done, now)
    except StoreError as exc:
        # The decision stands; only the chat answer is missing (repeating the resolve queues it).
        log.error("resolution_answer_not_queued", contradiction_id=cid, error=str(exc)[:200])
    return done
