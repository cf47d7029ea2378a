"""The vector store's interface (``ports.py`` re-exports it): a derived index of the graph's live items."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol, get_args

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.stores.records import MetaValue, VectorBackend, VectorHealth, VectorHit, VectorKind, VectorRebuild

COLLECTION_PREFIX = "tz_"
VECTOR_KINDS: tuple[str, ...] = get_args(VectorKind)
VECTOR_TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")


def collection_name(team: str, kind: str) -> str:
    """The collection of ``team``'s ``kind`` vectors; InputError for a team or kind no backend takes
    (every backend, the in-memory fake too, refuses the same ones)."""
    if not VECTOR_TEAM.fullmatch(team):
        raise InputError(
            f"invalid team name {team!r}: 1-48 characters of letters, digits, '_' and '-', "
            "starting with a letter or digit"
        )
    if kind not in VECTOR_KINDS:
        raise InputError(f"invalid vector kind {kind!r}: one of {', '.join(VECTOR_KINDS)}")
    return f"{COLLECTION_PREFIX}{team}_{kind}"


def check_upsert(
    name: str, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, MetaValue]]
) -> None:
    """What every backend's upsert refuses before writing anything: lists of different lengths, an id twice."""
    if not len(ids) == len(texts) == len(metadatas):
        raise InputError(
            f"upsert into {name}: {len(ids)} ids, {len(texts)} texts and {len(metadatas)} "
            "metadatas; they must be the same length"
        )
    if len(set(ids)) != len(ids):
        # Chroma rejects duplicates only within one call; across our batches the last would
        # silently win, so refuse up front.
        raise InputError(f"upsert into {name}: duplicate ids in one call")


class Embedder(Protocol):
    """Turns texts into unit-length vectors. One instance is built once and reused."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class VectorStore(Protocol):
    backend: VectorBackend

    def describe(self) -> str: ...

    def ping(self) -> None:
        """Raise StoreError if the store cannot answer."""
        ...

    def upsert(
        self,
        team: str,
        kind: VectorKind,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        """Add or replace vectors (embedded from ``texts``). Idempotent."""
        ...

    def present(self, team: str, kind: VectorKind, ids: Sequence[str] | None = None) -> set[str]:
        """Which of ``ids`` have a vector (every id in the collection when ``ids`` is None)."""
        ...

    def embeddings(self, team: str, kind: VectorKind, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of ``ids`` (ids without a vector are left out)."""
        ...

    def delete(self, team: str, kind: VectorKind, ids: Sequence[str]) -> None:
        """Remove vectors; unknown ids are ignored."""
        ...

    def query(self, team: str, kind: VectorKind, text: str, n: int, payload: bool = True) -> list[VectorHit]:
        """The ``n`` nearest vectors to ``text``, most similar first; with ``payload`` off, ids and
        similarities only (text "" and no metadata: recall reads what it shows from the graph)."""
        ...

    def count(self, team: str, kind: VectorKind) -> int: ...

    def counts(self) -> dict[str, dict[str, int]]:
        """Every team's live vectors by kind ({team: {"episodes": n, "patterns": m}}), in one pass."""
        ...

    def health(self, team: str, kind: VectorKind) -> VectorHealth:
        """Live vectors, and the deleted ones the index still holds (rebuild's trigger)."""
        ...

    def rebuild(self, team: str, kind: VectorKind) -> VectorRebuild | None:
        """Rewrite the collection from its live vectors (no re-embedding) and switch readers to it,
        crash-safe (see stores/chroma_generations.py); None when there is no collection. The caller
        holds the team (nothing else rebuilds it meanwhile)."""
        ...

    def drop_leftovers(self, older_than_s: float, dry_run: bool = False) -> list[str]:
        """What interrupted rebuilds left (a superseded collection; one being built for
        ``older_than_s``): dropped unless ``dry_run``. Returns their names (reconcile)."""
        ...

    def teams(self) -> list[str]:
        """Teams that have at least one collection."""
        ...

    def delete_all(self) -> None:
        """Drop every collection of this product (tests and a fresh demo only)."""
        ...

    def close(self) -> None: ...
