"""The entity-graph interface: only what ingestion, the steps and ops tools need.

The graph is the source of truth for every episode and pattern (it holds the text, the status
and the audit trail). The vector store is a derived index of the *live* items of the graph; see
``taskzilla_sleep.reconcile`` for how drift between the two is found and repaired.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from taskzilla_sleep.models import EntityLink, Episode, EpisodeStatus

ItemKind = Literal["episode", "pattern"]
GraphBackend = Literal["falkordb", "neo4j"]
PoisonKind = Literal["episode", "pattern", "contradiction"]


@dataclass(frozen=True)
class StoredEpisode:
    """What the graph holds of an episode id, to tell a re-delivery from a reused id."""

    status: EpisodeStatus
    content_hash: str | None  # None: stored before hashes were kept
    fields: Mapping[str, object]  # CONTENT_FIELDS still on the node (text is None once retired/pruned)


@dataclass(frozen=True)
class Poisoned:
    """A stored item whose properties could not be turned into its model: it is quarantined, not read."""

    kind: PoisonKind
    id: str
    team: str | None
    reason: str


class GraphCounts(BaseModel):
    """Sizes of the graph by label and status (for ``status`` and the report)."""

    episodes: dict[str, int] = Field(default_factory=dict)
    patterns: dict[str, int] = Field(default_factory=dict)
    contradictions: dict[str, int] = Field(default_factory=dict)
    entities: int = 0
    tombstones: int = 0
    relationships: int = 0

    def sizes(self) -> dict[str, int]:
        """The store sizes ops watch grow (ledger, report, metrics): linear in patterns, not in messages."""
        return {
            "episodes_total": sum(self.episodes.values()),
            "episodes_live": self.episodes.get("raw", 0) + self.episodes.get("absorbed", 0),
            "patterns_live": sum(v for k, v in self.patterns.items() if k in ("tentative", "active", "contested")),
            "patterns_total": sum(self.patterns.values()),
            "contradictions_open": self.contradictions.get("open", 0),
            "entities": self.entities,
            "tombstones": self.tombstones,
            "relationships": self.relationships,
            "quarantined": sum(c.get("quarantined", 0) for c in (self.episodes, self.patterns, self.contradictions)),
        }


class GraphStore(Protocol):
    backend: GraphBackend

    def describe(self) -> str:
        """Where it is, for status lines and errors (never a password)."""
        ...

    def ping(self) -> None:
        """Raise StoreError if the server cannot answer a trivial query."""
        ...

    def ensure_schema(self) -> None:
        """Create indexes/constraints. Idempotent; never called from constructors."""
        ...

    def existing_episodes(self, ids: Sequence[str]) -> dict[str, EpisodeStatus]:
        """Status of each of ``ids`` that the graph knows (retired/pruned included)."""
        ...

    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        """Status and content of each of ``ids`` that the graph knows (retired/pruned included)."""
        ...

    def upsert_episodes(self, episodes: Sequence[Episode], links: Sequence[EntityLink]) -> int:
        """Create the episodes not stored yet (existing ones are left untouched) and link their entities.

        All or nothing, whatever the backend raises: batched with UNWIND into an invisible staged
        state, made visible by one final query. Returns how many episodes were created.
        """
        ...

    def drop_stale_stages(self, older_than_s: float = ...) -> int:
        """Remove what an interrupted upsert left staged (invisible); returns how many stages."""
        ...

    def take_poisoned(self) -> list[Poisoned]:
        """The unreadable items the reads since the last call skipped (each once)."""
        ...

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        """Mark them ``quarantined`` (status kept in ``quarantined_from``): every step skips them."""
        ...

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        """Episodes by id, in no particular order; unknown ids are left out."""
        ...

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        """Text of each of ``ids`` that is live (should have a vector), for re-embedding."""
        ...

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        """Ids of every live item of ``kind`` (episodes raw/absorbed; patterns tentative/active/contested)."""
        ...

    def teams(self) -> list[str]: ...

    def counts(self) -> GraphCounts: ...

    def delete_all(self) -> None:
        """Remove every node of this product (tests and ``demo --fresh`` only)."""
        ...

    def close(self) -> None: ...


class PoisonLog:
    """What the reads skipped as unreadable, until the caller quarantines it (shared by threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], Poisoned] = {}

    def add(self, item: Poisoned) -> None:
        with self._lock:
            self._found.setdefault((item.kind, item.id), item)

    def take(self) -> list[Poisoned]:
        with self._lock:
            found, self._found = self._found, {}
        return sorted(found.values(), key=lambda p: (p.kind, p.id))
