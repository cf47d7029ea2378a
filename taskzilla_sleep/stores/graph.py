"""The entity-graph interface: only what ingestion, the steps and ops tools need.

The graph is the source of truth for every episode and pattern (it holds the text, the status
and the audit trail). The vector store is a derived index of the *live* items of the graph; see
``taskzilla_sleep.reconcile`` for how drift between the two is found and repaired.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from taskzilla_sleep.models import EntityLink, Episode, EpisodeStatus

ItemKind = Literal["episode", "pattern"]
GraphBackend = Literal["falkordb", "neo4j"]


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

    def upsert_episodes(self, episodes: Sequence[Episode], links: Sequence[EntityLink]) -> int:
        """MERGE episodes by id (existing ones are left untouched) and link their entities.

        Batched with UNWIND. Returns how many episodes were created.
        """
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
