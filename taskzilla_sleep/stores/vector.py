"""The vector-store interface and the embedder interface."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel

VectorKind = Literal["episodes", "patterns"]
VectorBackend = Literal["chroma-embedded", "chroma-server"]
MetaValue = str | int | float | bool


class VectorHit(BaseModel):
    id: str
    similarity: float  # cosine similarity in [-1, 1]; 1 is identical
    text: str
    metadata: dict[str, MetaValue]


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

    def query(self, team: str, kind: VectorKind, text: str, n: int) -> list[VectorHit]:
        """The ``n`` nearest vectors to ``text``, most similar first."""
        ...

    def count(self, team: str, kind: VectorKind) -> int: ...

    def teams(self) -> list[str]:
        """Teams that have at least one collection."""
        ...

    def delete_all(self) -> None:
        """Drop every collection of this product (tests and ``demo --fresh`` only)."""
        ...

    def close(self) -> None: ...
