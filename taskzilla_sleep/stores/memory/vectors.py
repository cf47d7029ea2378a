"""The vector store in memory, and a tiny deterministic embedder: for unit tests, not for production.

Held to the vector contract (tests/contract/test_vector_store.py runs on it too): the same input
errors, float32 vectors and distances as Chroma, a closed store refuses work, a collection keeps the
embedder that wrote it, and a second store opened ``sharing`` the first sees the same data (another
client of the same Chroma).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.stores.ports import (
    Embedder,
    MetaValue,
    VectorBackend,
    VectorHealth,
    VectorHit,
    VectorKind,
    VectorRebuild,
)
from taskzilla_sleep.stores.vector_port import check_upsert, collection_name

_QUERY_CACHE = 4  # as ChromaVectorStore: recall asks two collections the same text, embedded once


class HashEmbedder:
    """A tiny deterministic bag-of-words embedder for unit tests (not for production use)."""

    name = "hash-bow-64"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for t in texts:
            v = [0.0] * 64
            for w in t.lower().split():
                v[sum(w.encode()) % 64] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out


class MemoryVectorStore:
    backend: VectorBackend = "chroma-embedded"

    def __init__(self, embedder: Embedder | None = None, sharing: MemoryVectorStore | None = None) -> None:
        self._embedder: Embedder = embedder or HashEmbedder()
        # The data; a store opened ``sharing`` another holds the same dicts (a second client).
        self.cols: dict[tuple[str, VectorKind], dict[str, tuple[list[float], str, dict[str, MetaValue]]]] = (
            {} if sharing is None else sharing.cols
        )
        self.deleted: dict[tuple[str, VectorKind], int] = {} if sharing is None else sharing.deleted
        self.generations: dict[tuple[str, VectorKind], int] = {} if sharing is None else sharing.generations
        self.models: dict[tuple[str, VectorKind], str] = {} if sharing is None else sharing.models  # who embedded it
        self.fail_next: Exception | None = None
        self.on_upsert: Callable[[str, VectorKind, Sequence[str]], None] | None = None
        self._query_vectors: dict[str, list[float]] = {}
        self._closed = False

    def describe(self) -> str:
        return f"{self.backend} in memory"

    def ping(self) -> None:
        self._usable()
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc

    def upsert(
        self,
        team: str,
        kind: VectorKind,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        name = collection_name(team, kind)
        check_upsert(name, ids, texts, metadatas)
        if not ids:
            return  # as Chroma: no collection is created for nothing
        self.ping()
        self._col(team, kind)  # refuses another embedder's collection
        if self.on_upsert is not None:
            self.on_upsert(team, kind, ids)
        vectors = [_float32(v) for v in self._embedder.embed(texts)]
        self.models.setdefault((team, kind), self._embedder.name)
        col = self.cols.setdefault((team, kind), {})
        for i, v, t, m in zip(ids, vectors, texts, metadatas, strict=True):
            col[i] = (v, t, dict(m))

    def present(self, team: str, kind: VectorKind, ids: Sequence[str] | None = None) -> set[str]:
        col = self._col(team, kind)
        return set(col) if ids is None else {i for i in ids if i in col}

    def embeddings(self, team: str, kind: VectorKind, ids: Sequence[str]) -> dict[str, list[float]]:
        col = self._col(team, kind)
        return {i: list(col[i][0]) for i in ids if i in col}

    def delete(self, team: str, kind: VectorKind, ids: Sequence[str]) -> None:
        col = self._col(team, kind)
        gone = [i for i in dict.fromkeys(ids) if col.pop(i, None) is not None]
        if gone:
            self.deleted[(team, kind)] = self.deleted.get((team, kind), 0) + len(gone)

    def query(self, team: str, kind: VectorKind, text: str, n: int, payload: bool = True) -> list[VectorHit]:
        col = self._col(team, kind)
        if n <= 0 or not col:
            return []
        q = self._query_vector(text)
        hits = [
            VectorHit(
                id=i,
                # Chroma's cosine distance is a float32; the similarity is 1 minus it, as there.
                similarity=1.0 - float(np.float32(1.0 - sum(a * b for a, b in zip(q, v, strict=True)))),
                text=t if payload else "",
                metadata=dict(m) if payload else {},
            )
            for i, (v, t, m) in col.items()
        ]
        return sorted(hits, key=lambda h: (-h.similarity, h.id))[:n]

    def count(self, team: str, kind: VectorKind) -> int:
        return len(self._col(team, kind))

    def counts(self) -> dict[str, dict[str, int]]:
        self._usable()
        found: dict[str, dict[str, int]] = {}
        for (team, kind), col in self.cols.items():
            found.setdefault(team, {})[kind] = len(col)
        return found

    def health(self, team: str, kind: VectorKind) -> VectorHealth:
        key = (team, kind)
        return VectorHealth(self.count(team, kind), self.deleted.get(key, 0), self.generations.get(key, 0))

    def rebuild(self, team: str, kind: VectorKind) -> VectorRebuild | None:
        self.ping()
        collection_name(team, kind)
        key = (team, kind)
        if key not in self.cols:
            return None
        self.generations[key] = self.generations.get(key, 0) + 1
        dead = self.deleted.pop(key, 0)
        return VectorRebuild(generation=self.generations[key], live=len(self.cols[key]), dropped_deleted=dead)

    def drop_leftovers(self, older_than_s: float, dry_run: bool = False) -> list[str]:
        self._usable()
        return []  # a rebuild here is one step: it leaves nothing behind

    def teams(self) -> list[str]:
        self._usable()
        return sorted({t for (t, _k), col in self.cols.items()})

    def delete_all(self) -> None:
        self._usable()
        self.cols.clear()
        self.deleted.clear()
        self.generations.clear()
        self.models.clear()

    def close(self) -> None:
        self._closed = True

    def _usable(self) -> None:
        if self._closed:
            raise StoreError(f"{self.describe()}: the store is closed")

    def _col(self, team: str, kind: VectorKind) -> dict[str, tuple[list[float], str, dict[str, MetaValue]]]:
        """The collection (empty when there is none: reads create nothing), checked as Chroma does."""
        name = collection_name(team, kind)
        self._usable()
        stored = self.models.get((team, kind))
        if stored is not None and stored != self._embedder.name:
            raise StoreError(
                f"{self.describe()}: collection {name} holds vectors of {stored!r}, "
                f"not of the configured embedder {self._embedder.name!r}"
            )
        return self.cols.get((team, kind), {})

    def _query_vector(self, text: str) -> list[float]:
        kept = self._query_vectors.get(text)
        if kept is None:
            kept = _float32(self._embedder.embed([text])[0])
            if len(self._query_vectors) >= _QUERY_CACHE:
                self._query_vectors.pop(next(iter(self._query_vectors)))
            self._query_vectors[text] = kept
        return kept


def _float32(vector: Sequence[float]) -> list[float]:
    """What Chroma keeps of a vector: float32 values (read back as Python floats)."""
    return np.asarray(vector, dtype=np.float32).astype(np.float64).tolist()  # type: ignore[no-any-return]
