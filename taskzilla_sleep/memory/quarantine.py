"""Poisoned items: stored props that cannot be turned into their model never stop a step.

A read that meets one (a time out of range, a wrong type, a missing property — written by an
older version or by hand) skips it and remembers it (``GraphStore.take_poisoned``). Whoever ran the
reads then settles them here: the graph marks them ``quarantined`` (the status they had is kept in
``quarantined_from``, with the time and the reason), so every step, which filters on status, skips
them from then on; their vectors leave Chroma; each is logged. Repair by hand: fix the property and
set ``status`` back to ``quarantined_from`` (ops/runbook.md).
"""

from __future__ import annotations

import re
from datetime import datetime

import structlog

from taskzilla_sleep.core.models import TEAM_RE
from taskzilla_sleep.stores.ports import GraphStore, Poisoned, VectorKind, VectorStore

log = structlog.get_logger(__name__)

_VECTORS: dict[str, VectorKind] = {"episode": "episodes", "pattern": "patterns"}


def settle(graph: GraphStore, vectors: VectorStore, at: datetime, dry_run: bool = False) -> list[Poisoned]:
    """Quarantine what the reads skipped since the last call (a dry run only reports it)."""
    found = graph.take_poisoned()
    if not found:
        return []
    for p in found:
        log.warning("item_quarantined", kind=p.kind, item_id=p.id, team=p.team, reason=p.reason, dry_run=dry_run)
    if dry_run:
        return found
    graph.quarantine(found, at)
    by_collection: dict[tuple[str, VectorKind], list[str]] = {}
    for p in found:
        vkind = _VECTORS.get(p.kind)
        # A team no collection could be named after has no vectors to remove.
        if vkind is not None and p.team is not None and re.fullmatch(TEAM_RE, p.team):
            by_collection.setdefault((p.team, vkind), []).append(p.id)
    for (team, vkind), ids in sorted(by_collection.items()):
        vectors.delete(team, vkind, ids)
    return found
