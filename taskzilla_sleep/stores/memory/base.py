"""The state the in-memory graph holds, shared by its parts (the same split as ``stores/cypher``)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from taskzilla_sleep.core.models import Contradiction, Episode, Pattern, Run
from taskzilla_sleep.stores.ports import (
    AlertRecord,
    ArchivedItem,
    ChangeRecord,
    IngestMark,
    ItemUpdate,
    LeaseState,
    SessionRecord,
)

M = TypeVar("M", bound=BaseModel)

# Relationship types between patterns, as the graph names them.
REFINES = "REFINES"
COMPATIBLE_WITH = "COMPATIBLE_WITH"
UNRELATED_TO = "UNRELATED_TO"
MERGED_INTO = "MERGED_INTO"
SUPERSEDES = "SUPERSEDES"


class MemoryBase:
    """Plain dicts and sets standing for nodes and relationships; one lock makes each call atomic."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.episode_nodes: dict[str, Episode] = {}
        self.hashes: dict[str, str] = {}  # content_hash kept at ingest, as on a graph node
        self.entities: dict[str, dict[str, str | None]] = {}  # key -> team, kind, name
        self.mentions: set[tuple[str, str, str]] = set()  # (episode id, entity key, role)
        self.pattern_nodes: dict[str, Pattern] = {}
        self.pattern_accessed: dict[str, datetime] = {}
        self.about: set[tuple[str, str]] = set()  # (pattern id, entity key)
        self.evidence: set[tuple[str, str]] = set()  # (pattern id, episode id)
        self.reply_links: set[tuple[str, str]] = set()  # (reply id, answered id): REPLY_TO
        self.edit_pending: dict[str, float] = {}  # episode id -> when its edit's follow-up began (not done)
        self.pattern_rels: dict[tuple[str, str, str], str | None] = {}  # (a, type, b) -> prompt
        self.contradiction_nodes: dict[str, Contradiction] = {}
        self.quarantined_from: dict[tuple[str, str], str] = {}  # (kind, id) -> status before
        self.tombstone_nodes: dict[str, dict[str, Any]] = {}
        self.meta: dict[str, str] = {}
        self.run_ledger: dict[str, Run] = {}
        self.outbox: dict[str, AlertRecord] = {}
        self.alert_for: set[tuple[str, str]] = set()  # (alert key, contradiction id)
        self.leases: dict[str, LeaseState] = {}
        self.change_nodes: dict[str, ChangeRecord] = {}
        self.archived: dict[str, ArchivedItem] = {}  # image key -> before-image
        self.session_nodes: dict[str, SessionRecord] = {}  # by key (the SHA-256 of the cookie's value)
        self.seen_requests: dict[str, int] = {}  # key -> remembered until (ms)
        self.marks: dict[str, IngestMark] = {}  # ingests announced (IngestMark nodes)
        self.ingest_of: dict[str, str] = {}  # episode id -> the ingest that stored it
        # Tests set this to make the next call that checks it raise (a store going down).
        self.fail_next: Exception | None = None

    def _maybe_fail(self) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc

    @staticmethod
    def _updated(item: M, u: ItemUpdate) -> M:
        """``item`` with ``u`` applied: a field given as None is cleared, i.e. read back as the model's
        default (the graph removes the property; a counter then reads 0, an optional time None)."""
        fields = type(item).model_fields
        changes = {
            k: fields[k].get_default(call_default_factory=True) if v is None else v for k, v in u.changes().items()
        }
        return item.model_copy(update=changes)

    def _tombstone(self, item_id: str, **props: Any) -> None:
        self.tombstone_nodes.setdefault(item_id, {"id": item_id, **props})  # created once, as MERGE ON CREATE
