"""The backend a setting names, as the store the domain uses: the only way in from outside ``stores/``.

``app.build()`` calls these; everything else gets a ``ports.GraphStore`` / ``ports.VectorStore``.
Modules of the backends are imported here only when chosen (the Neo4j driver and Chroma are slow
to import and not every command needs both).
"""

from __future__ import annotations

from pathlib import Path

from taskzilla_sleep.core.settings import GraphSettings, VectorSettings
from taskzilla_sleep.stores.ports import Embedder, GraphStore, VectorStore


def open_graph(g: GraphSettings, password: str | None, falkordb_dir: Path) -> GraphStore:
    """Neo4j (checked to accept our login now, not at the first query) or the embedded FalkorDB in
    ``falkordb_dir`` (started, or joined when another process runs it)."""
    if g.backend == "neo4j":
        from taskzilla_sleep.stores.cypher import CypherGraphStore
        from taskzilla_sleep.stores.neo4j import Neo4jExecutor

        auth = (g.neo4j_user, password) if password else None
        executor = Neo4jExecutor(g.neo4j_uri, auth, g.neo4j_database, g.connect_timeout_s)
        try:
            executor.check_login(g.neo4j_user, has_password=password is not None)
        except BaseException:
            executor.close()
            raise
        return CypherGraphStore(executor)
    from taskzilla_sleep.stores.falkordb import open_falkordb

    return open_falkordb(falkordb_dir, g.falkordb_graph, g.connect_timeout_s)


def open_vectors(v: VectorSettings, embedder: Embedder, embedded_dir: Path, token: str | None = None) -> VectorStore:
    """A Chroma server (``token``: its auth token, sent as ``vector.token_header``), or Chroma's
    PersistentClient in ``embedded_dir``."""
    from taskzilla_sleep.stores.chroma import ChromaVectorStore

    if v.backend == "chroma-server":
        headers = dict(v.headers)
        if token:
            headers[v.token_header] = f"Bearer {token}" if v.token_header == "Authorization" else token
        return ChromaVectorStore.server(
            v.host,
            v.port,
            embedder,
            timeout_s=v.timeout_s,
            ssl=v.ssl,
            headers=headers,
            tenant=v.tenant,
            database=v.database,
        )
    return ChromaVectorStore.embedded(embedded_dir, embedder)
