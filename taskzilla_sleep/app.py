"""build(settings) -> Services: the one place that creates store, embedding and LLM clients."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType

import structlog

from taskzilla_sleep.entities import EntityExtractor
from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.ingest import Ingestor, Limits, WriteDiscipline
from taskzilla_sleep.llm.base import LLMProvider
from taskzilla_sleep.settings import Secrets, Settings
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.vector import Embedder, VectorStore

log = structlog.get_logger(__name__)


@dataclass
class Services:
    settings: Settings
    graph: CypherGraphStore
    vectors: VectorStore
    embedder: Embedder
    _llm: LLMProvider | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def llm(self) -> LLMProvider:
        """Built on first use: the offline provider, or litellm when ``llm.model`` is set."""
        if self._llm is None:
            self._llm = build_llm(self.settings, self.embedder)
        return self._llm

    def ingestor(self, clock: Callable[[], datetime] | None = None) -> Ingestor:
        s = self.settings.ingest
        return Ingestor(
            self.graph,
            self.vectors,
            EntityExtractor(s.projects, s.tools),
            WriteDiscipline(s.write_discipline),
            Limits.of(s),
            clock or (lambda: datetime.now(UTC)),
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for closer in (self.vectors.close, self.graph.close):
            try:
                closer()
            except StoreError as exc:
                log.warning("close_failed", error=str(exc))

    def __enter__(self) -> Services:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def build_embedder(settings: Settings) -> Embedder:
    from taskzilla_sleep.embeddings import LiteLLMEmbedder, OfflineMiniLM

    e = settings.embeddings
    if e.provider == "litellm":
        return LiteLLMEmbedder(model=e.model, api_base=e.api_base, timeout_s=e.timeout_s, batch_size=e.batch_size)
    return OfflineMiniLM()


def build_llm(settings: Settings, embedder: Embedder) -> LLMProvider:
    m = settings.llm
    if m.model is None:
        from taskzilla_sleep.llm.offline import OfflineProvider

        return OfflineProvider(embedder)
    from taskzilla_sleep.llm.client import LiteLLMProvider

    return LiteLLMProvider(
        model=m.model,
        api_base=m.api_base,
        timeout_s=m.timeout_s,
        max_retries=m.max_retries,
        max_concurrency=m.max_concurrency,
        temperature=m.temperature,
        json_schema=m.json_schema,
    )


def build_graph(settings: Settings, secrets: Secrets) -> CypherGraphStore:
    g = settings.graph
    if g.backend == "neo4j":
        from taskzilla_sleep.stores.neo4j import Neo4jGraphStore

        password = secrets.neo4j_password.get_secret_value() if secrets.neo4j_password else None
        auth = (g.neo4j_user, password) if password else None
        return Neo4jGraphStore(g.neo4j_uri, auth, g.neo4j_database, g.connect_timeout_s, g.batch_size)
    from taskzilla_sleep.stores.falkordb import FalkorDBGraphStore

    return FalkorDBGraphStore.start(settings.data_dir / "falkordb", g.falkordb_graph, g.connect_timeout_s, g.batch_size)


def build_vectors(settings: Settings, embedder: Embedder) -> VectorStore:
    from taskzilla_sleep.stores.chroma import ChromaVectorStore

    v = settings.vector
    if v.backend == "chroma-server":
        return ChromaVectorStore.server(v.host, v.port, embedder, timeout_s=v.timeout_s)
    return ChromaVectorStore.embedded(settings.data_dir / "chroma", embedder)


def build(settings: Settings, secrets: Secrets | None = None, ensure_schema: bool = True) -> Services:
    """Create every client. The caller owns the result and must close it (it is a context manager)."""
    secrets = secrets or Secrets()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    embedder = build_embedder(settings)
    graph = build_graph(settings, secrets)
    try:
        vectors = build_vectors(settings, embedder)
    except BaseException:
        graph.close()
        raise
    services = Services(settings, graph, vectors, embedder)
    if ensure_schema:
        try:
            graph.ensure_schema()
        except BaseException:
            services.close()
            raise
    return services
