"""Rebuilding a Chroma collection from its live vectors: generations, the switch, the leftovers.

hnswlib only marks a deleted vector; Chroma keeps its slot in the index for good (chroma-core/chroma#2594),
and a month of prune and decay leaves an episodes collection with three dead slots per live one
(BENCHMARKS.md: queries 1.42x slower than on a rebuilt collection). The cure is a new collection.

Chroma has no alias that readers follow, so each collection ``tz_{team}_{kind}`` has *generations*:
0 is that name, N >= 1 is ``tz_{team}_{kind}_gN``. The current one is a record of the registry
collection ``tz__generations`` (id: the base name; metadata ``generation``; no record: 0). One record
upsert is one atomic write on both backends, so a reader always finds a whole collection. A rebuild:

1. drops this collection's leftovers (its caller holds the team, so nobody else is rebuilding it);
2. creates generation N+1, marked ``tz_building`` (the time it started), and copies every live
   vector of N into it: ids, embeddings, documents, metadatas, in batches, never re-embedded;
3. marks N+1 built and switches the registry to it;
4. copies what was written to N meanwhile (new ids, and ids whose document or metadata changed),
   deletes what was deleted from N meanwhile, and drops N.

A crash before 3 leaves readers on N and a half-written N+1; after 3, readers on N+1 and N still
there. Both are *leftovers* (a generation that is not current): :func:`leftovers` names them for
reconcile, which drops them (one being built is left alone for ``older_than_s``: another replica
may be writing it). Each generation counts its deletes in its own metadata (``tz_deleted``), so a new
generation starts at 0.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.types import Embeddable, EmbeddingFunction
from chromadb.errors import NotFoundError

from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.stores.records import VectorRebuild

REGISTRY = "tz__generations"
BUILDING = "tz_building"  # metadata of a generation being written: when its copy started (epoch s)
DELETED = "tz_deleted"  # metadata: vectors deleted from this generation (its dead HNSW slots)
_GENERATION_RE = re.compile(r"^(?P<base>.+)_g(?P<n>[1-9][0-9]{0,8})$")
_ID_PAGE = 10_000


def name_of(base: str, generation: int) -> str:
    return base if generation == 0 else f"{base}_g{generation}"


def split_generation(name: str) -> tuple[str, int]:
    """``tz_a_episodes_g3`` -> (``tz_a_episodes``, 3); a name without a suffix is generation 0."""
    match = _GENERATION_RE.fullmatch(name)
    return (match["base"], int(match["n"])) if match else (name, 0)


def deleted_of(collection: Collection) -> int:
    value = (collection.metadata or {}).get(DELETED, 0)
    return value if isinstance(value, int) else 0


def count_deletes(collection: Collection, n: int) -> None:
    """Add ``n`` to the generation's delete counter (a read-modify-write: two processes deleting
    from one collection at the same moment may lose a count; the counter only triggers a rebuild)."""
    if n:
        meta = dict(collection.metadata or {})
        meta[DELETED] = deleted_of(collection) + n
        collection.modify(metadata=meta)


class Registry:
    """The current generation of each collection (see the module docstring)."""

    def __init__(self, client: Callable[[], ClientAPI]) -> None:
        self._client = client
        self._handle: Collection | None = None

    def current(self, base: str) -> int:
        registry = self._registry(create=False)
        if registry is None:
            return 0
        try:
            got = registry.get(ids=[base], include=["metadatas"])
        except NotFoundError:  # dropped since we looked it up (delete_all)
            self._handle = None
            return 0
        metas = got["metadatas"] or []
        value = metas[0].get("generation", 0) if got["ids"] and metas and metas[0] else 0
        return value if isinstance(value, int) else 0

    def switch(self, base: str, generation: int) -> None:
        registry = self._registry(create=True)
        assert registry is not None
        # The registry's vectors are never searched: one constant dimension keeps Chroma content.
        registry.upsert(
            ids=[base], embeddings=np.ones((1, 1), dtype=np.float32), metadatas=[{"generation": generation}]
        )

    def all(self) -> dict[str, int]:
        """Every collection's current generation (one read: those without a record are at 0)."""
        registry = self._registry(create=False)
        if registry is None:
            return {}
        try:
            got = registry.get(include=["metadatas"])
        except NotFoundError:
            self._handle = None
            return {}
        found: dict[str, int] = {}
        for i, meta in zip(got["ids"], got["metadatas"] or [], strict=False):
            value = (meta or {}).get("generation")
            if isinstance(value, int):
                found[i] = value
        return found

    def forget(self) -> None:
        self._handle = None

    def _registry(self, *, create: bool) -> Collection | None:
        if self._handle is None:
            client = self._client()
            if create:
                self._handle = client.get_or_create_collection(REGISTRY, embedding_function=None)
            else:
                try:
                    self._handle = client.get_collection(REGISTRY, embedding_function=None)
                except NotFoundError:
                    return None
        return self._handle


def live_counts(
    client: ClientAPI, registry: Registry, page: int, kind_of: Callable[[str], tuple[str, str] | None]
) -> dict[str, dict[str, int]]:
    """Every team's vectors by kind, counted in the current generations only: one listing, one
    registry read and one count per collection (a few at a time: each is a request to a server).
    ``kind_of``: a collection name's (team, kind), None for a collection that is not a team's."""
    current = registry.all()
    found: list[tuple[str, str, Collection]] = []
    offset = 0
    while True:
        listed = client.list_collections(limit=page, offset=offset)
        for c in listed:
            base, generation = split_generation(c.name)
            owner = kind_of(c.name)
            if owner is not None and generation == current.get(base, 0):
                found.append((*owner, c))
        if len(listed) < page:
            break
        offset += page
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="chroma-count") as pool:
        sizes = list(pool.map(lambda x: x[2].count(), found))
    counts: dict[str, dict[str, int]] = {}
    for (team, kind, _c), n in zip(found, sizes, strict=True):
        counts.setdefault(team, {})[kind] = n
    return counts


def rebuild(
    client: ClientAPI,
    registry: Registry,
    base: str,
    existing: Sequence[str],
    embedding_function: EmbeddingFunction[Embeddable],
    batch: int,
) -> VectorRebuild | None:
    """Steps 1-4 of the module docstring for collection ``base``; None when it has no collection.
    ``existing``: every collection name (this collection's generations are among them)."""
    current = registry.current(base)
    discarded = [n for n in existing if split_generation(n)[0] == base and split_generation(n)[1] != current]
    for name in discarded:
        client.delete_collection(name)
    try:
        old = client.get_collection(name_of(base, current), embedding_function=embedding_function)
    except NotFoundError:
        return None
    generation = current + 1
    new = client.create_collection(
        name_of(base, generation),
        configuration={"hnsw": {"space": "cosine"}},
        metadata={BUILDING: time.time()},
        embedding_function=embedding_function,
    )
    copied = _copy(old, new, sorted(all_ids(old)), batch)
    crashpoint("vectors.rebuild_before_switch")
    new.modify(metadata={DELETED: 0})  # built: no longer a generation in the making
    registry.switch(base, generation)
    crashpoint("vectors.rebuild_after_switch")
    # Written to the old generation while we copied (an ingest, a person's pin or resolution does not
    # wait for the night): new ids are copied, ids whose text or metadata changed copied over again.
    old_rows, new_rows = contents(old), contents(new)
    copied += _copy(old, new, sorted(old_rows.keys() - new_rows.keys()), batch)
    changed = sorted(i for i in old_rows.keys() & new_rows.keys() if old_rows[i] != new_rows[i])
    _copy(old, new, changed, batch, replace=True)
    gone = sorted(new_rows.keys() - old_rows.keys())
    if gone:
        new.delete(ids=gone)
        count_deletes(new, len(gone))
    dead = deleted_of(old)
    client.delete_collection(old.name)
    return VectorRebuild(
        generation=generation, live=copied - len(gone), dropped_deleted=dead, discarded=tuple(discarded)
    )


Metadata = Mapping[str, Any] | None


def leftovers(registry: Registry, collections: Mapping[str, Metadata], older_than_s: float) -> list[str]:
    """Generations that are not current: superseded ones, and ones being built for ``older_than_s``.
    ``collections``: every collection's name and metadata."""
    found: list[str] = []
    by_base: dict[str, list[tuple[str, int]]] = {}
    for name in collections:
        if name.startswith("tz_") and name != REGISTRY:
            base, generation = split_generation(name)
            by_base.setdefault(base, []).append((name, generation))
    for base, generations in sorted(by_base.items()):
        if len(generations) == 1 and generations[0][1] == 0:
            continue  # the common case: never rebuilt, nothing to ask the registry
        current = registry.current(base)
        for name, generation in generations:
            superseded = generation < current
            if superseded or (generation > current and _age_s(collections[name]) >= older_than_s):
                found.append(name)
    return found


def all_ids(collection: Collection) -> set[str]:
    found: set[str] = set()
    offset = 0
    while True:
        got = collection.get(include=[], limit=_ID_PAGE, offset=offset)["ids"]
        found.update(got)
        if len(got) < _ID_PAGE:
            return found
        offset += _ID_PAGE


def contents(collection: Collection) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """Each vector's document and metadata, by id (what an upsert under the same id may change)."""
    found: dict[str, tuple[str | None, dict[str, Any]]] = {}
    offset = 0
    while True:
        got = collection.get(include=["documents", "metadatas"], limit=_ID_PAGE, offset=offset)
        none: list[Any] = [None] * len(got["ids"])
        documents: list[Any] = list(got["documents"] or none)
        metadatas: list[Any] = list(got["metadatas"] or none)
        found.update((i, (d, _plain(m))) for i, d, m in zip(got["ids"], documents, metadatas, strict=True))
        if len(got["ids"]) < _ID_PAGE:
            return found
        offset += _ID_PAGE


def _copy(old: Collection, new: Collection, ids: Sequence[str], batch: int, replace: bool = False) -> int:
    """``ids`` from ``old`` into ``new`` (``replace``: over what ``new`` holds under them)."""
    copied = 0
    for start in range(0, len(ids), batch):
        got = old.get(ids=list(ids[start : start + batch]), include=["embeddings", "documents", "metadatas"])
        if not got["ids"] or got["embeddings"] is None:
            continue
        # Through float32: what Chroma stores; a server's decimals come back as the same values.
        vectors = np.asarray(got["embeddings"], dtype=np.float32)
        metadatas: Any = [_plain(m) or None for m in (got["metadatas"] or [{}] * len(got["ids"]))]
        write = new.upsert if replace else new.add
        write(ids=list(got["ids"]), embeddings=vectors, documents=got["documents"], metadatas=metadatas)
        copied += len(got["ids"])
        if start == 0:
            crashpoint("vectors.rebuild_mid_copy")
    return copied


def _plain(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(metadata) if metadata else {}


def _age_s(metadata: Metadata) -> float:
    """How long ago a generation being built started (a built one that never became current: forever)."""
    at = (metadata or {}).get(BUILDING)
    return time.time() - at if isinstance(at, int | float) else float("inf")
