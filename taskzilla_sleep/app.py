"""build(settings) -> Services: the one place that creates store, embedding and LLM clients."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import structlog

from taskzilla_sleep.core.errors import ConfigError, StoreError
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.llm.base import LLMProvider
from taskzilla_sleep.memory.ingest import Ingestor, Limits, WriteDiscipline
from taskzilla_sleep.memory.recall.query import query_pool
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.service import audit_trail as audit
from taskzilla_sleep.stores.ports import Embedder, GraphStore, VectorStore

log = structlog.get_logger(__name__)


@dataclass
class Services:
    settings: Settings
    graph: GraphStore
    vectors: VectorStore
    embedder: Embedder
    _llm: LLMProvider | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)
    # This process's counters and histograms (served by the worker at /metrics): one set per Services.
    instruments: Instruments = field(default_factory=Instruments, repr=False)
    # Where this process puts decisions on record (installed by build, for the data folder it opened).
    audit_log: audit.AuditLog | None = field(default=None, repr=False)
    # The episode queries of this process's recalls (the API's threads share it): no thread until the
    # first recall, stopped by close.
    recall_pool: ThreadPoolExecutor = field(default_factory=query_pool, repr=False)

    @property
    def llm(self) -> LLMProvider:
        """Built on first use: the offline provider, or litellm when ``llm.model`` is set."""
        if self._llm is None:
            self._llm = build_llm(self.settings, self.embedder, self.instruments)
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
            self.instruments,
            self.settings.worker.lease_ttl_s,
            self.settings.distill.confidence_floor,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.recall_pool.shutdown(wait=True, cancel_futures=True)  # before the stores its queries read
        if self.audit_log is not None:
            audit.uninstall(self.audit_log)
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
    from taskzilla_sleep.stores.embeddings import LiteLLMEmbedder, OfflineMiniLM, OfflineMultilingual

    e = settings.embeddings
    if e.provider == "litellm":
        return LiteLLMEmbedder(model=e.model, api_base=e.api_base, timeout_s=e.timeout_s, batch_size=e.batch_size)
    if e.provider == "multilingual":
        return OfflineMultilingual(batch_size=e.batch_size)
    return OfflineMiniLM()


def build_llm(settings: Settings, embedder: Embedder, instruments: Instruments | None = None) -> LLMProvider:
    m = settings.llm
    if m.model is None:
        from taskzilla_sleep.llm.offline import OfflineProvider

        return OfflineProvider(embedder, settings.distill)
    from taskzilla_sleep.llm.client import LiteLLMProvider

    return LiteLLMProvider(
        model=m.model,
        api_base=m.api_base,
        timeout_s=m.timeout_s,
        max_retries=m.max_retries,
        max_concurrency=m.max_concurrency,
        temperature=m.temperature,
        json_schema=m.json_schema,
        batch_groups=m.batch_groups,
        instruments=instruments,
    )


DATA_DIR_HINT = "make it writable, or choose another with --data-dir (env TASKZILLA_DATA_DIR)"


def writable_dir(path: Path, what: str = "data dir", hint: str = DATA_DIR_HINT) -> Path:
    """Create ``path`` if needed; ConfigError (exit 2) unless it is a directory this process can write."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"config error: {what} {path} is a file, not a directory: {hint}") from None
    except NotADirectoryError:
        raise ConfigError(f"config error: {what} {path} cannot be created, a parent is a file: {hint}") from None
    except OSError as exc:
        raise ConfigError(f"config error: {what} {path} cannot be created ({exc.strerror}): {hint}") from None
    if not path.is_dir():
        raise ConfigError(f"config error: {what} {path} is not a directory: {hint}")
    # access() answers for this process (root included) and for read-only mounts (EROFS).
    if not os.access(path, os.W_OK | os.X_OK):
        reason = "is on a read-only file system" if _read_only_fs(path) else "is not writable by this user"
        raise ConfigError(f"config error: {what} {path} {reason}: {hint}")
    return path


def _store_dir(settings: Settings, name: str) -> Path:
    """An embedded store's directory inside the data dir, both checked before a server is started."""
    writable_dir(settings.data_dir)
    return writable_dir(settings.data_dir / name, f"{name} directory of the data dir")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def build_graph(settings: Settings, secrets: Secrets) -> GraphStore:
    from taskzilla_sleep.stores.backends import open_graph

    password = secrets.neo4j_password.get_secret_value() if secrets.neo4j_password else None
    where = _store_dir(settings, "falkordb") if settings.graph.backend == "falkordb" else settings.data_dir
    return open_graph(settings.graph, password, where)


def build_vectors(settings: Settings, embedder: Embedder, secrets: Secrets | None = None) -> VectorStore:
    from taskzilla_sleep.stores.backends import open_vectors

    where = _store_dir(settings, "chroma") if settings.vector.backend == "chroma-embedded" else settings.data_dir
    token = secrets.chroma_token.get_secret_value() if secrets and secrets.chroma_token else None
    return open_vectors(settings.vector, embedder, where, token)


def build(settings: Settings, secrets: Secrets | None = None, ensure_schema: bool = True) -> Services:
    """Create every client. The caller owns the result and must close it (it is a context manager)."""
    secrets = secrets or Secrets()
    writable_dir(settings.data_dir)
    if settings.memory_index.dir is not None:
        # Checked now, not after a whole night when the index is written.
        writable_dir(settings.memory_dir, "memory_index.dir", "make it writable, or set memory_index.dir to another")
    embedder = build_embedder(settings)
    graph = build_graph(settings, secrets)
    try:
        vectors = build_vectors(settings, embedder, secrets)
    except BaseException:
        graph.close()
        raise
    services = Services(settings, graph, vectors, embedder)
    services.audit_log = audit.install(audit.AuditLog(settings.data_dir / audit.AUDIT_FILE))
    if ensure_schema:
        try:
            graph.ensure_schema()
        except BaseException:
            services.close()
            raise
    return services
