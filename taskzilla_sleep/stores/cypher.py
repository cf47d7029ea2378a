"""The graph store in Cypher, shared by Neo4j and FalkorDB.

Every query here is written in the part of Cypher both dialects agree on: times are epoch
milliseconds (FalkorDB has no ``datetime()``), nodes are found by our own ``id``/``key``
property (FalkorDB has no ``elementId()``), no ``EXISTS { }`` subqueries, writes are batched
with ``UNWIND $rows``. The differences (schema statements, how a query is sent and how rows
come back) are isolated in :class:`Dialect` and the two small subclasses in neo4j.py and
falkordb.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import structlog

from taskzilla_sleep.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    EntityLink,
    Episode,
    EpisodeStatus,
    from_ms,
    to_ms,
)
from taskzilla_sleep.stores.cycle_queries import CycleQueries
from taskzilla_sleep.stores.graph import GraphBackend, GraphCounts, ItemKind

log = structlog.get_logger(__name__)

Row = dict[str, Any]

# Named query blocks, loaded once. Both dialects run them unchanged.
Q_EXISTING = """
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN e.id AS id, e.status AS status
"""

Q_UPSERT_EPISODES = """
UNWIND $rows AS r
MERGE (e:Episode {id: r.id})
ON CREATE SET e += r.props
"""

# ON MATCH fills what a bare MERGE elsewhere left out (a fact pinned to a person who has not spoken yet).
Q_LINK_ENTITIES = """
UNWIND $rows AS r
MERGE (n:Entity {key: r.key})
ON CREATE SET n.team = r.team, n.kind = r.kind, n.name = r.name
ON MATCH SET n.team = coalesce(n.team, r.team), n.kind = coalesce(n.kind, r.kind), n.name = coalesce(n.name, r.name)
WITH n, r
MATCH (e:Episode {id: r.episode_id})
MERGE (e)-[m:MENTIONS {role: r.role}]->(n)
"""

Q_GET_EPISODES = """
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN properties(e) AS p
"""

Q_LIVE_TEXTS = {
    "episode": """
UNWIND $ids AS id
MATCH (e:Episode {id: id})
WHERE e.team = $team AND e.status IN $live
RETURN e.id AS id, e.text AS text
""",
    "pattern": """
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
WHERE p.team = $team AND p.status IN $live
RETURN p.id AS id, p.statement AS text
""",
}

# One row holding a list: for tens of thousands of ids, far cheaper to send and decode than a row each.
Q_LIVE_IDS = {
    "episode": "MATCH (e:Episode) WHERE e.team = $team AND e.status IN $live RETURN collect(e.id) AS ids",
    "pattern": "MATCH (p:Pattern) WHERE p.team = $team AND p.status IN $live RETURN collect(p.id) AS ids",
}

Q_TEAMS = """
MATCH (e:Episode) RETURN DISTINCT e.team AS team
UNION
MATCH (p:Pattern) RETURN DISTINCT p.team AS team
"""

Q_COUNT_BY_STATUS = {
    "episodes": "MATCH (n:Episode) RETURN n.status AS status, count(n) AS n",
    "patterns": "MATCH (n:Pattern) RETURN n.status AS status, count(n) AS n",
    "contradictions": "MATCH (n:Contradiction) RETURN n.status AS status, count(n) AS n",
}
Q_COUNT_ENTITIES = "MATCH (n:Entity) RETURN count(n) AS n"
Q_COUNT_TOMBSTONES = "MATCH (n:Tombstone) RETURN count(n) AS n"
Q_COUNT_RELS = "MATCH ()-[r]->() RETURN count(r) AS n"
Q_DUMP_NODES = "MATCH (n) RETURN labels(n) AS labels, properties(n) AS props"
Q_DUMP_RELS = (
    "MATCH (a)-[r]->(b) RETURN labels(a) AS la, coalesce(a.id, a.key) AS a, type(r) AS type, "
    "properties(r) AS props, labels(b) AS lb, coalesce(b.id, b.key) AS b"
)
Q_DELETE_SOME = "MATCH (n) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n"

# Unique keys of each label: an index (FalkorDB) or a uniqueness constraint (Neo4j).
KEYS: tuple[tuple[str, str], ...] = (
    ("Episode", "id"),
    ("Pattern", "id"),
    ("Entity", "key"),
    ("Contradiction", "id"),
    ("Tombstone", "id"),
    ("Run", "id"),
    ("Meta", "key"),
    ("Lease", "name"),
    ("Alert", "key"),
)
# Secondary indexes the steps filter on.
INDEXES: tuple[tuple[str, str], ...] = (
    ("Episode", "team"),
    ("Episode", "status"),
    ("Episode", "ts"),
    ("Pattern", "team"),
    ("Pattern", "status"),
    ("Alert", "status"),
)


def episode_props(ep: Episode) -> Row:
    """An Episode as graph properties (times as epoch ms; None values are simply not set)."""
    props: Row = {
        "id": ep.id,
        "team": ep.team,
        "channel": ep.channel,
        "author": ep.author,
        "text": ep.text,
        "ts": to_ms(ep.ts),
        "provenance": ep.provenance.value,
        "connector": ep.connector,
        "status": ep.status.value,
        "schema_absorbed": ep.schema_absorbed,
        "absorbed_at": to_ms(ep.absorbed_at) if ep.absorbed_at else None,
        "absorbed_by": ep.absorbed_by,
        "ingested_at": to_ms(ep.ingested_at),
        "last_accessed": to_ms(ep.last_accessed) if ep.last_accessed else None,
        "pinned": ep.pinned,
        "distilled_at": to_ms(ep.distilled_at) if ep.distilled_at else None,
        "distill_attempts": ep.distill_attempts or None,
    }
    return {k: v for k, v in props.items() if v is not None}


def episode_from_props(p: Row) -> Episode:
    def t(key: str) -> Any:
        v = p.get(key)
        return from_ms(int(v)) if v is not None else None

    return Episode(
        id=p["id"],
        team=p["team"],
        channel=p["channel"],
        author=p["author"],
        text=p.get("text") or "",
        ts=t("ts"),
        provenance=p["provenance"],
        connector=p.get("connector"),
        status=p.get("status", "raw"),
        schema_absorbed=int(p.get("schema_absorbed") or 0),
        absorbed_at=t("absorbed_at"),
        absorbed_by=p.get("absorbed_by"),
        ingested_at=t("ingested_at"),
        last_accessed=t("last_accessed"),
        pinned=bool(p.get("pinned", False)),
        distilled_at=t("distilled_at"),
        distill_attempts=int(p.get("distill_attempts") or 0),
    )


def chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


class CypherGraphStore(CycleQueries, ABC):
    """Everything but transport and schema syntax; subclasses provide ``_read``/``_write``."""

    backend: GraphBackend

    def __init__(self, batch_size: int = 500) -> None:
        self._batch = batch_size

    # -- transport (dialect) -------------------------------------------------------------
    @abstractmethod
    def _read(self, query: str, params: Row | None = None) -> list[Row]: ...

    @abstractmethod
    def _write(self, query: str, params: Row | None = None) -> list[Row]: ...

    @abstractmethod
    def _schema_statements(self) -> list[str]: ...

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- for modules that keep their own named queries (outbox, lease) ---------------------
    def query(self, query: str, params: Row | None = None) -> list[Row]:
        """Run a read-only named query of another module (same dialect rules as this file)."""
        return self._read(query, params)

    def execute(self, query: str, params: Row | None = None) -> list[Row]:
        """Run a write as ONE transaction (Neo4j) / one atomic query (FalkorDB)."""
        return self._write(query, params)

    # -- shared behaviour ----------------------------------------------------------------
    def ping(self) -> None:
        self._read("RETURN 1 AS ok")

    def ensure_schema(self) -> None:
        for stmt in self._schema_statements():
            self._write_schema(stmt)
        log.debug("graph_schema_ensured", backend=self.backend)

    def _write_schema(self, stmt: str) -> None:
        self._write(stmt)

    def existing_episodes(self, ids: Sequence[str]) -> dict[str, EpisodeStatus]:
        out: dict[str, EpisodeStatus] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(Q_EXISTING, {"ids": list(part)}):
                out[r["id"]] = EpisodeStatus(r["status"])
        return out

    def upsert_episodes(self, episodes: Sequence[Episode], links: Sequence[EntityLink]) -> int:
        before = self.existing_episodes([e.id for e in episodes])
        rows = [{"id": e.id, "props": episode_props(e)} for e in episodes if e.id not in before]
        for part in chunks(rows, self._batch):
            self._write(Q_UPSERT_EPISODES, {"rows": list(part)})
        link_rows = [
            {
                "episode_id": lk.episode_id,
                "key": lk.entity.key,
                "team": lk.entity.team,
                "kind": lk.entity.kind.value,
                "name": lk.entity.name,
                "role": lk.role,
            }
            for lk in links
        ]
        # Links are MERGEd, so re-linking an already stored episode (a rerun) changes nothing.
        for part in chunks(link_rows, self._batch):
            self._write(Q_LINK_ENTITIES, {"rows": list(part)})
        return len(rows)

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        out: list[Episode] = []
        for part in chunks(list(ids), self._batch * 4):
            out.extend(episode_from_props(r["p"]) for r in self._read(Q_GET_EPISODES, {"ids": list(part)}))
        return out

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        live = _live(kind)
        out: dict[str, str] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(Q_LIVE_TEXTS[kind], {"ids": list(part), "team": team, "live": live}):
                out[r["id"]] = r["text"]
        return out

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        rows = self._read(Q_LIVE_IDS[kind], {"team": team, "live": _live(kind)})
        return {i for r in rows for i in r["ids"] or []}

    def teams(self) -> list[str]:
        return sorted({r["team"] for r in self._read(Q_TEAMS) if r["team"]})

    def counts(self) -> GraphCounts:
        by: dict[str, dict[str, int]] = {}
        for label, q in Q_COUNT_BY_STATUS.items():
            by[label] = {str(r["status"]): int(r["n"]) for r in self._read(q)}
        return GraphCounts(
            episodes=by["episodes"],
            patterns=by["patterns"],
            contradictions=by["contradictions"],
            entities=int(self._read(Q_COUNT_ENTITIES)[0]["n"]),
            tombstones=int(self._read(Q_COUNT_TOMBSTONES)[0]["n"]),
            relationships=int(self._read(Q_COUNT_RELS)[0]["n"]),
        )

    def export(self, skip_labels: frozenset[str] = frozenset({"Run"})) -> dict[str, list[Any]]:
        """Every node and relationship as plain data, sorted (snapshots, backups, crash tests)."""
        nodes = [
            {"labels": sorted(r["labels"]), "props": dict(sorted(r["props"].items()))}
            for r in self._read(Q_DUMP_NODES)
            if not skip_labels & set(r["labels"])
        ]
        rels = [
            {
                "from": [sorted(r["la"]), r["a"]],
                "type": r["type"],
                "props": dict(sorted((r["props"] or {}).items())),
                "to": [sorted(r["lb"]), r["b"]],
            }
            for r in self._read(Q_DUMP_RELS)
            if not skip_labels & (set(r["la"]) | set(r["lb"]))
        ]
        key = repr
        return {"nodes": sorted(nodes, key=key), "relationships": sorted(rels, key=key)}

    def delete_all(self) -> None:
        while int(self._write(Q_DELETE_SOME)[0]["n"]) > 0:
            pass


def _live(kind: ItemKind) -> list[str]:
    return sorted(s.value for s in (EPISODE_LIVE if kind == "episode" else PATTERN_LIVE))
