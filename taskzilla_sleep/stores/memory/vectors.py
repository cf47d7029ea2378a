"""The vector store in memory, and a tiny deterministic embedder: for unit tests, not for production."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from taskzilla_sleep.stores.ports import (
    Embedder,
    MetaValue,
    VectorBackend,
    VectorHealth,
    VectorHit,
    VectorKind,
    VectorRebuild,
)


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

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder: Embedder = embedder or HashEmbedder()
        self.cols: dict[tuple[str, VectorKind], dict[str, tuple[list[float], str, dict[str, MetaValue]]]] = {}
        self.fail_next: Exception | None = None
        self.on_upsert: Callable[[str, VectorKind, Sequence[str]], None] | None = None
        self.deleted: dict[tuple[str, VectorKind], int] = {}  # what an HNSW index would still hold
        self.generations: dict[tuple[str, VectorKind], int] = {}

    def describe(self) -> str:
        return "memory vectors"

    def ping(self) -> None:
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
        self.ping()
        if self.on_upsert is not None:
            self.on_upsert(team, kind, ids)
        col = self.cols.setdefault((team, kind), {})
        for i, v, t, m in zip(ids, self._embedder.embed(texts), texts, metadatas, strict=True):
            col[i] = (v, t, dict(m))

    def present(self, team: str, kind: VectorKind, ids: Sequence[str] | None = None) -> set[str]:
        col = self.cols.get((team, kind), {})
        return set(col) if ids is None else {i for i in ids if i in col}

    def embeddings(self, team: str, kind: VectorKind, ids: Sequence[str]) -> dict[str, list[float]]:
        col = self.cols.get((team, kind), {})
        return {i: list(col[i][0]) for i in ids if i in col}

    def delete(self, team: str, kind: VectorKind, ids: Sequence[str]) -> None:
        col = self.cols.get((team, kind), {})
        gone = [i for i in dict.fromkeys(ids) if col.pop(i, None) is not None]
        self.deleted[(team, kind)] = self.deleted.get((team, kind), 0) + len(gone)

    def query(self, team: str, kind: VectorKind, text: str, n: int, payload: bool = True) -> list[VectorHit]:
        col = self.cols.get((team, kind), {})
        q = self._embedder.embed([text])[0]
        hits = [
            VectorHit(
                id=i,
                similarity=sum(a * b for a, b in zip(q, v, strict=True)),
                text=t if payload else "",
                metadata=m if payload else {},
            )
            for i, (v, t, m) in col.items()
        ]
        return sorted(hits, key=lambda h: (-h.similarity, h.id))[:n]

    def count(self, team: str, kind: VectorKind) -> int:
        return len(self.cols.get((team, kind), {}))

    def counts(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for (team, kind), col in self.cols.items():
            found.setdefault(team, {})[kind] = len(col)
        return found

    def health(self, team: str, kind: VectorKind) -> VectorHealth:
        key = (team, kind)
        return VectorHealth(self.count(team, kind), self.deleted.get(key, 0), self.generations.get(key, 0))

    def rebuild(self, team: str, kind: VectorKind) -> VectorRebuild | None:
        self.ping()
        key = (team, kind)
        if key not in self.cols:
            return None
        self.generations[key] = self.generations.get(key, 0) + 1
        dead = self.deleted.pop(key, 0)
        return VectorRebuild(generation=self.generations[key], live=len(self.cols[key]), dropped_deleted=dead)

    def drop_leftovers(self, older_than_s: float, dry_run: bool = False) -> list[str]:
        return []  # a rebuild here is one step: it leaves nothing behind

    def teams(self) -> list[str]:
        return sorted({t for (t, _k), col in self.cols.items()})

    def delete_all(self) -> None:
        self.cols.clear()
        self.deleted.clear()
        self.generations.clear()

    def close(self) -> None:
        pass
