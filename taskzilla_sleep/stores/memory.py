"""In-memory fakes of both stores, for unit tests. Same protocols, same observable behaviour.

The contract suite (tests/contract) runs its assertions against these too, so a fake that drifts
from the real backends is caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from taskzilla_sleep.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    EntityLink,
    Episode,
    EpisodeStatus,
)
from taskzilla_sleep.stores.graph import GraphBackend, GraphCounts, ItemKind, Poisoned, StoredEpisode
from taskzilla_sleep.stores.vector import Embedder, MetaValue, VectorBackend, VectorHit, VectorKind


class MemoryGraphStore:
    backend: GraphBackend = "falkordb"  # behaves like the embedded default

    def __init__(self) -> None:
        self.episodes: dict[str, Episode] = {}
        self.patterns: dict[str, dict[str, object]] = {}
        self.entities: dict[str, dict[str, str]] = {}
        self.mentions: set[tuple[str, str, str]] = set()
        self.contradictions: dict[str, dict[str, object]] = {}
        self.tombstones: dict[str, dict[str, object]] = {}
        self.hashes: dict[str, str] = {}  # content_hash kept at ingest, as on a graph node
        self.fail_next: Exception | None = None

    def _maybe_fail(self) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc

    def describe(self) -> str:
        return "memory graph"

    def ping(self) -> None:
        self._maybe_fail()

    def ensure_schema(self) -> None:
        self._maybe_fail()

    def existing_episodes(self, ids: Sequence[str]) -> dict[str, EpisodeStatus]:
        return {i: self.episodes[i].status for i in ids if i in self.episodes}

    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        out: dict[str, StoredEpisode] = {}
        for i in ids:
            if i in self.episodes:
                e = self.episodes[i]
                fields: dict[str, object] = dict(e.content())
                if e.status not in EPISODE_LIVE:
                    fields["text"] = None  # retired and pruned episodes lose their text, as in the graph
                out[i] = StoredEpisode(e.status, self.hashes.get(i), fields)
        return out

    def upsert_episodes(self, episodes: Sequence[Episode], links: Sequence[EntityLink]) -> int:
        self._maybe_fail()
        created = 0
        for ep in episodes:
            if ep.id not in self.episodes:
                self.episodes[ep.id] = ep.model_copy()
                self.hashes[ep.id] = ep.content_hash()
                created += 1
        for lk in links:
            if lk.episode_id not in self.episodes:
                continue
            e = lk.entity
            self.entities.setdefault(e.key, {"team": e.team, "kind": e.kind.value, "name": e.name})
            self.mentions.add((lk.episode_id, e.key, lk.role))
        return created

    def drop_stale_stages(self, older_than_s: float = 600.0) -> int:
        return 0  # an upsert here is one step: nothing is ever left staged

    def take_poisoned(self) -> list[Poisoned]:
        return []  # holds models, never unreadable props

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        for p in items:
            if p.kind == "episode" and p.id in self.episodes:
                self.episodes[p.id].status = EpisodeStatus.QUARANTINED

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        return [self.episodes[i].model_copy() for i in ids if i in self.episodes]

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        if kind == "episode":
            return {
                i: self.episodes[i].text
                for i in ids
                if i in self.episodes and self.episodes[i].team == team and self.episodes[i].status in EPISODE_LIVE
            }
        return {
            i: str(self.patterns[i]["statement"])
            for i in ids
            if i in self.patterns and self.patterns[i]["team"] == team and self.patterns[i]["status"] in PATTERN_LIVE
        }

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        if kind == "episode":
            return {i for i, e in self.episodes.items() if e.team == team and e.status in EPISODE_LIVE}
        return {i for i, p in self.patterns.items() if p["team"] == team and p["status"] in PATTERN_LIVE}

    def teams(self) -> list[str]:
        return sorted({e.team for e in self.episodes.values()} | {str(p["team"]) for p in self.patterns.values()})

    def counts(self) -> GraphCounts:
        def by_status(items: Sequence[str]) -> dict[str, int]:
            out: dict[str, int] = {}
            for s in items:
                out[s] = out.get(s, 0) + 1
            return out

        return GraphCounts(
            episodes=by_status([e.status.value for e in self.episodes.values()]),
            patterns=by_status([str(p["status"]) for p in self.patterns.values()]),
            contradictions=by_status([str(c["status"]) for c in self.contradictions.values()]),
            entities=len(self.entities),
            tombstones=len(self.tombstones),
            relationships=len(self.mentions),
        )

    def delete_all(self) -> None:
        self.__init__()  # type: ignore[misc]

    def close(self) -> None:
        pass


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
        for i in ids:
            col.pop(i, None)

    def query(self, team: str, kind: VectorKind, text: str, n: int) -> list[VectorHit]:
        col = self.cols.get((team, kind), {})
        q = self._embedder.embed([text])[0]
        hits = [
            VectorHit(id=i, similarity=sum(a * b for a, b in zip(q, v, strict=True)), text=t, metadata=m)
            for i, (v, t, m) in col.items()
        ]
        return sorted(hits, key=lambda h: (-h.similarity, h.id))[:n]

    def count(self, team: str, kind: VectorKind) -> int:
        return len(self.cols.get((team, kind), {}))

    def teams(self) -> list[str]:
        return sorted({t for (t, _k), col in self.cols.items()})

    def delete_all(self) -> None:
        self.cols.clear()

    def close(self) -> None:
        pass
