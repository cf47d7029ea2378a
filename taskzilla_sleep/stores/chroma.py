"""Chroma as the vector store: embedded (a directory) or a server (HTTP).

One collection per team and kind, ``tz_{team}_{kind}``, in cosine space; a rebuild writes a new
generation of it and switches readers over (chroma_generations.py). The embedding function
is passed on every get: without it Chroma would rebuild one from the collection's config or fall
back to its default, which downloads a model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import chromadb
import httpx
import numpy as np
import numpy.typing as npt
import structlog
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.types import Embeddable, EmbeddingFunction
from chromadb.config import DEFAULT_DATABASE, DEFAULT_TENANT, Settings
from chromadb.errors import NotFoundError

from taskzilla_sleep.core.errors import StoreError, TaskzillaError
from taskzilla_sleep.stores import chroma_generations as gens
from taskzilla_sleep.stores.chroma_http import ServerAddress, connect_server, http_sessions
from taskzilla_sleep.stores.embeddings import chroma_embedding_function
from taskzilla_sleep.stores.outage import Outage
from taskzilla_sleep.stores.ports import (
    Embedder,
    MetaValue,
    VectorBackend,
    VectorHealth,
    VectorHit,
    VectorKind,
    VectorRebuild,
)
from taskzilla_sleep.stores.vector_port import (
    COLLECTION_PREFIX,
    VECTOR_KINDS,
    VECTOR_TEAM,
    check_upsert,
    collection_name,
)

log = structlog.get_logger(__name__)

_PREFIX = COLLECTION_PREFIX
_KINDS = VECTOR_KINDS
_TEAM_RE = VECTOR_TEAM
_collection_name = collection_name
# Chroma allows ~5,000 records a call; smaller batches keep HTTP bodies (≈4 KB a vector as
# JSON) and each call's duration modest, so the per-request timeout stays meaningful.
_BATCH_CAP = 1000
_LIST_PAGE = 1000
_QUERY_CACHE = 4  # query texts whose embedding is kept: recall asks two collections the same text
# Listing every id of a collection (reconcile, prune): ids only, so far bigger pages than for
# vectors; each page is one query (a scan from its offset), so fewer pages is much less work.
_ID_PAGE = 10_000


class ChromaVectorStore:
    """The ``VectorStore`` on Chroma. Build with :meth:`embedded` or :meth:`server`.

    The Chroma client is created on first use, not in the constructor: ``chromadb.HttpClient``
    talks to the server while it is being built, and that must happen under a timeout.
    """

    def __init__(
        self,
        backend: VectorBackend,
        location: str,
        connect: Callable[[], ClientAPI],
        embedder: Embedder,
        outage: Outage | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.backend: VectorBackend = backend
        self._location = location
        self._connect = connect
        # A server found unreachable fails the calls right after at once (see outage.py).
        self._outage = outage
        self._embedder = embedder
        # Chroma annotates the parameter as EmbeddingFunction[Documents | Images]; a text-only
        # function is what it expects at run time, the generic is just invariant.
        self._embedding_function = cast(EmbeddingFunction[Embeddable], chroma_embedding_function(embedder))
        self._lock = threading.Lock()
        self._client_obj: ClientAPI | None = None
        self._closed = False
        self._batch_size: int | None = None
        self._kept: dict[str, Collection] = {}  # collection handles for queries (see query), by base name
        self._registry = gens.Registry(self._client)  # each collection's current generation
        self._query_vectors: dict[str, npt.NDArray[np.float32]] = {}  # the last few query texts, embedded
        self._log = log.bind(backend=backend, location=location)
        self._timeout_s = timeout_s  # the server's request timeout (None: embedded)

    @classmethod
    def embedded(cls, path: Path, embedder: Embedder) -> ChromaVectorStore:
        """Chroma in this process, persisted under ``path``."""

        def connect() -> ClientAPI:
            return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))

        return cls("chroma-embedded", str(path), connect, embedder)

    @classmethod
    def server(
        cls,
        host: str,
        port: int,
        embedder: Embedder,
        timeout_s: float = 5.0,
        *,
        ssl: bool = False,
        headers: Mapping[str, str] | None = None,
        tenant: str = DEFAULT_TENANT,
        database: str = DEFAULT_DATABASE,
    ) -> ChromaVectorStore:
        """A Chroma server (``chroma run``) at ``host:port`` (https with ``ssl``), its collections in
        ``tenant``/``database`` (both must exist: checked when it connects), every request with
        ``headers`` and bounded by ``timeout_s``."""
        address = ServerAddress(host, port, ssl, dict(headers or {}), tenant, database)
        outage = Outage(timeout_s)

        def connect() -> ClientAPI:
            return connect_server(address, timeout_s, outage, lambda exc: _why(exc, timeout_s))

        return cls("chroma-server", address.where, connect, embedder, outage, timeout_s)

    # -- VectorStore ---------------------------------------------------------------------------

    def describe(self) -> str:
        return f"{self.backend} {self._location}"

    def ping(self) -> None:
        with self._errors("ping"):
            self._client().heartbeat()

    def upsert(
        self,
        team: str,
        kind: VectorKind,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        name = _collection_name(team, kind)
        check_upsert(name, ids, texts, metadatas)
        if not ids:
            return
        with self._errors("upsert", name):
            collection = self._collection(self._current(name), create=True)
            assert collection is not None
            size = self._batch()
            for start in range(0, len(ids), size):
                end = start + size
                collection.upsert(
                    ids=list(ids[start:end]),
                    documents=list(texts[start:end]),
                    # Chroma rejects an empty metadata dict; None means "no metadata".
                    metadatas=[dict(m) or None for m in metadatas[start:end]],  # type: ignore[misc]
                )
        self._log.info("vectors_upserted", collection=name, n=len(ids))

    def present(self, team: str, kind: VectorKind, ids: Sequence[str] | None = None) -> set[str]:
        name = _collection_name(team, kind)
        if ids is not None and not ids:
            return set()
        found: set[str] = set()
        with self._errors("present", name):
            collection = self._collection(self._current(name), create=False)
            if collection is None:
                return found
            if ids is None:
                page = _ID_PAGE
                offset = 0
                while True:
                    got = collection.get(include=[], limit=page, offset=offset)["ids"]
                    found.update(got)
                    if len(got) < page:
                        break
                    offset += page
            else:
                unique = list(dict.fromkeys(ids))
                size = self._batch()
                for start in range(0, len(unique), size):
                    found.update(collection.get(ids=unique[start : start + size], include=[])["ids"])
        return found

    def embeddings(self, team: str, kind: VectorKind, ids: Sequence[str]) -> dict[str, list[float]]:
        name = _collection_name(team, kind)
        vectors: dict[str, list[float]] = {}
        if not ids:
            return vectors
        with self._errors("embeddings", name):
            collection = self._collection(self._current(name), create=False)
            if collection is None:
                return vectors
            unique = list(dict.fromkeys(ids))
            size = self._batch()
            for start in range(0, len(unique), size):
                got = collection.get(ids=unique[start : start + size], include=["embeddings"])
                if got["embeddings"] is None or not got["ids"]:
                    continue
                # Chroma keeps float32; a server sends each as a short decimal, which read as float64
                # is not the embedded client's exact value. Through float32, both backends agree.
                rows: list[list[float]] = np.asarray(got["embeddings"], dtype=np.float32).astype(np.float64).tolist()
                vectors.update(zip(got["ids"], rows, strict=True))
        return vectors

    def delete(self, team: str, kind: VectorKind, ids: Sequence[str]) -> None:
        name = _collection_name(team, kind)
        if not ids:
            return
        with self._errors("delete", name):
            collection = self._collection(self._current(name), create=False)
            if collection is None:
                return
            unique = list(dict.fromkeys(ids))
            size = self._batch()
            deleted = 0
            for start in range(0, len(unique), size):
                # Only the ones there leave a dead slot behind: they are what the rebuild trigger counts.
                there = collection.get(ids=unique[start : start + size], include=[])["ids"]
                if there:
                    collection.delete(ids=there)
                    deleted += len(there)
            gens.count_deletes(collection, deleted)
        self._log.info("vectors_deleted", collection=collection.name, n=deleted)

    def query(self, team: str, kind: VectorKind, text: str, n: int, payload: bool = True) -> list[VectorHit]:
        name = _collection_name(team, kind)
        if n <= 0:
            return []
        include: Any = ["documents", "metadatas", "distances"] if payload else ["distances"]
        with self._errors("query", name):
            # Recall asks both collections the same question: the query is embedded once (a
            # small cache), and the collection handle is kept (on a server, one round trip less).
            vector = self._query_vector(text)
            for attempt in (1, 2):
                collection = self._kept_collection(name)
                if collection is None:
                    return []
                try:
                    result = collection.query(query_embeddings=vector[np.newaxis, :], n_results=n, include=include)
                    break
                except NotFoundError:
                    self._forget_collections()  # dropped behind our back: look it up once more
                    if attempt == 2:
                        raise
        ids = result["ids"][0]
        documents = (result["documents"] or [[]])[0]
        metadatas = (result["metadatas"] or [[]])[0]
        distances = (result["distances"] or [[]])[0]
        hits = [
            VectorHit(
                id=id_,
                # The collection is in cosine space, where distance = 1 - cosine similarity.
                similarity=1.0 - float(np.float32(distances[i])),  # float32, as Chroma computed it
                text=documents[i] if i < len(documents) and documents[i] is not None else "",
                metadata=_scalar_metadata(metadatas[i] if i < len(metadatas) else None),
            )
            for i, id_ in enumerate(ids)
        ]
        hits.sort(key=lambda hit: hit.similarity, reverse=True)
        return hits

    def count(self, team: str, kind: VectorKind) -> int:
        name = _collection_name(team, kind)
        with self._errors("count", name):
            collection = self._collection(self._current(name), create=False)
            return 0 if collection is None else collection.count()

    def counts(self) -> dict[str, dict[str, int]]:
        with self._errors("counts"):
            return gens.live_counts(self._client(), self._registry, _LIST_PAGE, _owner)

    def health(self, team: str, kind: VectorKind) -> VectorHealth:
        name = _collection_name(team, kind)
        with self._errors("health", name):
            generation = self._registry.current(name)
            collection = self._collection(gens.name_of(name, generation), create=False)
            if collection is None:
                return VectorHealth(live=0, deleted=0, generation=generation)
            return VectorHealth(live=collection.count(), deleted=gens.deleted_of(collection), generation=generation)

    def rebuild(self, team: str, kind: VectorKind) -> VectorRebuild | None:
        name = _collection_name(team, kind)
        with self._errors("rebuild", name):
            client = self._client()
            done = gens.rebuild(
                client, self._registry, name, list(self._collections()), self._embedding_function, self._batch()
            )
        self._forget_collections()
        if done is not None:
            self._log.info("vectors_rebuilt", collection=name, generation=done.generation, live=done.live)
        return done

    def drop_leftovers(self, older_than_s: float, dry_run: bool = False) -> list[str]:
        with self._errors("drop_leftovers"):
            found = gens.leftovers(self._registry, self._collections(), older_than_s)
            if not dry_run:
                client = self._client()
                for name in found:
                    client.delete_collection(name)
        if found:
            self._log.warning("vector_leftovers_found", names=",".join(found), dropped=not dry_run)
        return found

    def teams(self) -> list[str]:
        with self._errors("teams"):
            names = self._collection_names()
        return sorted({team for team in map(_team_of, names) if team is not None})

    def delete_all(self) -> None:
        self._forget_collections()
        with self._errors("delete_all"):
            client = self._client()
            ours = [name for name in self._collection_names() if name.startswith(_PREFIX)]
            for name in ours:
                client.delete_collection(name)
        self._log.info("vector_collections_dropped", n=len(ours))

    def close(self) -> None:
        with self._lock:
            client, self._client_obj, self._closed = self._client_obj, None, True
            self._kept.clear()
        # ClientAPI doesn't declare close(); the Client that both constructors return has it,
        # and for the embedded store it releases the SQLite files.
        close = getattr(client, "close", None)
        if callable(close):
            with self._errors("close"):
                close()
                # chromadb never closes its HTTP sessions (the client's and its internal admin
                # client's); their sockets would linger until garbage collection.
                for session in http_sessions(client):
                    session.close()
            self._log.debug("vector_store_closed")

    # -- internals -----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, operation: str, collection: str | None = None) -> Iterator[None]:
        """Convert whatever Chroma (or its HTTP layer) raises into a StoreError, once, here."""
        if self._outage is not None:
            self._outage.check()
        try:
            yield
        except TaskzillaError:
            # Already ours (e.g. the embedder failed): keep its type and message.
            raise
        except httpx.TransportError as exc:
            # The server is gone or does not answer: say so, and where, not just which call failed.
            what = operation if collection is None else f"{operation} {collection}"
            cause = f"{self.backend} unreachable at {self._location}: {_why(exc, self._timeout_s)} (during {what})"
            raise (self._outage.down(cause) if self._outage is not None else StoreError(cause)) from exc
        except Exception as exc:
            where = self._location if collection is None else f"{self._location}, {collection}"
            raise StoreError(f"{self.backend} {operation} failed ({where}): {type(exc).__name__}: {exc}") from exc

    def _client(self) -> ClientAPI:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.describe()}: the store is closed")
            if self._client_obj is None:
                self._client_obj = self._connect()
                self._log.debug("vector_store_connected")
            return self._client_obj

    def _batch(self) -> int:
        if self._batch_size is None:
            self._batch_size = max(1, min(_BATCH_CAP, self._client().get_max_batch_size()))
        return self._batch_size

    def _query_vector(self, text: str) -> npt.NDArray[np.float32]:
        with self._lock:
            kept = self._query_vectors.get(text)
        if kept is not None:
            return kept
        vector = np.asarray(self._embedder.embed([text])[0], dtype=np.float32)
        with self._lock:
            if len(self._query_vectors) >= _QUERY_CACHE:
                self._query_vectors.pop(next(iter(self._query_vectors)))
            self._query_vectors[text] = vector
        return vector

    def _kept_collection(self, name: str) -> Collection | None:
        with self._lock:
            kept = self._kept.get(name)
        if kept is not None:
            return kept
        collection = self._collection(self._current(name), create=False)
        if collection is not None:
            with self._lock:
                self._kept[name] = collection
        return collection

    def _forget_collections(self) -> None:
        with self._lock:
            self._kept.clear()
        self._registry.forget()

    def _current(self, base: str) -> str:
        """The collection that holds ``base``'s vectors now: its current generation (asked each call;
        only queries keep a handle, and look again when it was dropped by a rebuild)."""
        return gens.name_of(base, self._registry.current(base))

    def _collection(self, name: str, *, create: bool) -> Collection | None:
        """The collection ``name`` (created when ``create``), or None when it doesn't exist."""
        client = self._client()
        if create:
            collection = client.get_or_create_collection(
                name,
                # A fresh dict each call: Chroma writes the embedding function into it.
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=self._embedding_function,
            )
        else:
            try:
                collection = client.get_collection(
                    name,
                    embedding_function=self._embedding_function,
                )
            except NotFoundError:
                return None
        self._check_embedder(collection)
        return collection

    def _check_embedder(self, collection: Collection) -> None:
        # Vectors from two models don't compare, even at the same dimension; Chroma only checks
        # the function's class name, which is the same for every hosted model.
        function: Any = collection.configuration_json.get("embedding_function")
        config = function.get("config") if isinstance(function, dict) else None
        stored = config.get("embedder") if isinstance(config, dict) else None
        if stored is not None and stored != self._embedder.name:
            raise StoreError(
                f"{self.describe()}: collection {collection.name} holds vectors of {stored!r}, "
                f"not of the configured embedder {self._embedder.name!r}"
            )

    def _collection_names(self) -> list[str]:
        return list(self._collections())

    def _collections(self) -> dict[str, Mapping[str, Any] | None]:
        """Every collection's name and metadata."""
        client = self._client()
        found: dict[str, Mapping[str, Any] | None] = {}
        offset = 0
        while True:
            page = client.list_collections(limit=_LIST_PAGE, offset=offset)
            found.update((c.name, c.metadata) for c in page)
            if len(page) < _LIST_PAGE:
                return found
            offset += _LIST_PAGE


def _owner(name: str) -> tuple[str, str] | None:
    """The (team, kind) of a collection named ``tz_{team}_{kind}`` (any generation); None for anything else."""
    if not name.startswith(_PREFIX):
        return None
    rest = gens.split_generation(name)[0][len(_PREFIX) :]
    for kind in _KINDS:
        team = rest.removesuffix(f"_{kind}")
        if team != rest and _TEAM_RE.fullmatch(team):
            return team, kind
    return None


def _team_of(name: str) -> str | None:
    owner = _owner(name)
    return None if owner is None else owner[0]


def _scalar_metadata(metadata: Mapping[str, Any] | None) -> dict[str, MetaValue]:
    if not metadata:
        return {}
    return {k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool)}


def _why(exc: BaseException | str, timeout_s: float | None) -> str:
    """What failed, in words: refused, no answer within the timeout, connection dropped..."""
    if isinstance(exc, str):
        return exc
    if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
        return "connection refused"
    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return f"no answer within {timeout_s:g} s" if timeout_s else "timed out"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the server dropped the connection ({exc})"
    return f"{type(exc).__name__}: {exc}"
