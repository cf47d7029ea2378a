"""The graph store in Cypher, shared by Neo4j and FalkorDB.

Every query here is written in the part of Cypher both dialects agree on: times are epoch
milliseconds (FalkorDB has no ``datetime()``), nodes are found by our own ``id``/``key``
property (FalkorDB has no ``elementId()``), no ``EXISTS { }`` subqueries, writes are batched
with ``UNWIND $rows``. The differences (schema statements, how a query is sent and how rows
come back) are isolated in :class:`Dialect` and the two small subclasses in neo4j.py and
falkordb.py.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import structlog

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.models import (
    CONTENT_FIELDS,
    EPISODE_LIVE,
    PATTERN_LIVE,
    TEAM_RE,
    EntityLink,
    Episode,
    EpisodeStatus,
    from_ms,
    to_ms,
)
from taskzilla_sleep.stores.cycle_queries import CycleQueries, why_unreadable
from taskzilla_sleep.stores.graph import GraphBackend, GraphCounts, ItemKind, Poisoned, PoisonLog, StoredEpisode

log = structlog.get_logger(__name__)

Row = dict[str, Any]
_TEAM = re.compile(TEAM_RE)
# A stage no batch touched for this long has lost its writer (a batch takes seconds; every backend
# call is bounded by the graph timeouts): reconcile drops it.
STAGE_STALE_AFTER_S = 600.0

# Named query blocks, loaded once. Both dialects run them unchanged.
Q_EXISTING = """
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN e.id AS id, e.status AS status
"""

Q_STORED_EPISODES = """
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN e.id AS id, e.status AS status, e.content_hash AS content_hash, e.team AS team, e.channel AS channel,
       e.author AS author, e.ts AS ts, e.provenance AS provenance, e.text AS text
"""

# An upsert is all or nothing. Its batches create the episodes *staged* under one token (``stage``):
# status 'staged', no id (kept in staged_id, the status in staged_status) — every reader filters on
# status or finds episodes by id, so none sees them, and a leftover never blocks the same id
# (Neo4j's uniqueness constraint). ONE final query then gives them their id and status, unless an id
# got stored by another writer meanwhile or a batch is missing. A failure drops the stage; a stage
# left by a killed process is dropped once stale (reconcile: no batch of it for 10 minutes, by the
# staged episodes' ``staged_at``). Entities a stage created carry its token until then.
# There is no node for the stage itself: FalkorDB 4.16, after a few thousand commits that deleted
# such a node inside the commit query, answered "Attempted to access undefined attribute" to every
# later scan of that label (reproduced: ~64,000 episodes in 500-row files), which stopped reconcile and
# so every night. ON MATCH fills what a bare MERGE elsewhere left out (a fact pinned to a person
# who has not spoken yet).
STAGED = "staged"
Q_STAGE_EPISODES = """
UNWIND $rows AS r
CREATE (e:Episode)
SET e += r.props, e.stage = $stage, e.staged_at = timestamp()
WITH e, r
UNWIND r.links AS l
MERGE (n:Entity {key: l.key})
ON CREATE SET n.team = l.team, n.kind = l.kind, n.name = l.name, n.stage = $stage
ON MATCH SET n.team = coalesce(n.team, l.team), n.kind = coalesce(n.kind, l.kind), n.name = coalesce(n.name, l.name)
MERGE (e)-[:MENTIONS {role: l.role}]->(n)
"""

Q_COMMIT_STAGE = """
OPTIONAL MATCH (s:Episode {stage: $stage})
OPTIONAL MATCH (x:Episode {id: s.staged_id})
WITH count(DISTINCT s) AS n, count(x) AS clashes
WHERE clashes = 0 AND n = $expected
MATCH (s:Episode {stage: $stage})
SET s.id = s.staged_id, s.status = s.staged_status
REMOVE s.staged_id, s.staged_status, s.stage, s.staged_at
WITH DISTINCT n
OPTIONAL MATCH (m:Entity {stage: $stage})
REMOVE m.stage
RETURN DISTINCT n
"""

Q_STAGE_STATE = """
OPTIONAL MATCH (s:Episode {stage: $stage})
OPTIONAL MATCH (x:Episode {id: s.staged_id})
RETURN count(DISTINCT s) AS staged, count(x) AS clashes
"""

Q_DROP_STAGED = "MATCH (s:Episode {stage: $stage}) WITH s LIMIT 5000 DETACH DELETE s RETURN count(*) AS n"
# Entities the stage created and nothing else links to by now leave with it; the others stay.
Q_DROP_STAGE_ENTITIES = """
MATCH (n:Entity {stage: $stage})
OPTIONAL MATCH (n)-[r]-()
WITH n, count(r) AS rels
WHERE rels = 0
DELETE n
"""
Q_UNMARK_STAGE_ENTITIES = "MATCH (n:Entity {stage: $stage}) REMOVE n.stage"
Q_STALE_STAGES = """
MATCH (e:Episode)
WHERE e.status = 'staged'
WITH e.stage AS token, max(e.staged_at) AS last
WHERE last < timestamp() - $age_ms
RETURN token
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
MATCH (e:Episode) WHERE e.stage IS NULL RETURN DISTINCT e.team AS team
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
    ("Episode", "stage"),
    ("Entity", "stage"),
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
        "declined_size": ep.declined_size or None,
        "content_hash": ep.content_hash(),
    }
    return {k: v for k, v in props.items() if v is not None}


def _staged(props: Row) -> Row:
    """An episode's props as staged: no id and no status a reader would match until the commit."""
    out = dict(props)
    out["staged_id"], out["staged_status"], out["status"] = out.pop("id"), out["status"], STAGED
    return out


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
        declined_size=int(p.get("declined_size") or 0),
    )


def chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


class CypherGraphStore(CycleQueries, ABC):
    """Everything but transport and schema syntax; subclasses provide ``_read``/``_write``."""

    backend: GraphBackend

    def __init__(self, batch_size: int = 500) -> None:
        self._batch = batch_size
        self._poison = PoisonLog()

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
        return {i: s.status for i, s in self._stored(Q_EXISTING, ids).items()}

    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        return self._stored(Q_STORED_EPISODES, ids)

    def _stored(self, query: str, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        out: dict[str, StoredEpisode] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(query, {"ids": list(part)}):
                try:
                    status = EpisodeStatus(r["status"])
                except ValueError as exc:  # present all the same: never stored over, never embedded
                    status = EpisodeStatus.QUARANTINED
                    team = r.get("team")
                    reason = why_unreadable(exc)
                    self._poison.add(Poisoned("episode", r["id"], team if isinstance(team, str) else None, reason))
                fields = {f: r[f] for f in CONTENT_FIELDS if f in r}
                out[r["id"]] = StoredEpisode(status, r.get("content_hash"), fields)
        return out

    def upsert_episodes(self, episodes: Sequence[Episode], links: Sequence[EntityLink]) -> int:
        before = self.existing_episodes([e.id for e in episodes])
        new: dict[str, Episode] = {}
        for e in episodes:
            if e.id not in before:
                new.setdefault(e.id, e)
        if not new:
            return 0
        links_of: dict[str, list[Row]] = {}
        for lk in links:
            if lk.episode_id in new:
                links_of.setdefault(lk.episode_id, []).append(
                    {
                        "key": lk.entity.key,
                        "team": lk.entity.team,
                        "kind": lk.entity.kind.value,
                        "name": lk.entity.name,
                        "role": lk.role,
                    }
                )
        rows = [{"props": _staged(episode_props(e)), "links": links_of.get(i, [])} for i, e in new.items()]
        stage = uuid.uuid4().hex
        try:
            for part in chunks(rows, self._batch):
                self._write(Q_STAGE_EPISODES, {"stage": stage, "rows": list(part)})
            if not self._write(Q_COMMIT_STAGE, {"stage": stage, "expected": len(rows)}):
                raise StoreError(self._not_committed(stage, len(rows)))
        except BaseException:
            self._drop_stage_quietly(stage)
            raise
        return len(rows)

    def _not_committed(self, stage: str, expected: int) -> str:
        (state,) = self._read(Q_STAGE_STATE, {"stage": stage})
        if int(state["clashes"]):
            why = f"{state['clashes']} of its episode ids were stored by another writer meanwhile"
        elif not int(state["staged"]):
            why = "its staged episodes were removed as stale before the commit"
        else:
            why = f"only {state['staged']} of {expected} staged episodes were found at the commit"
        return f"{self.backend}: nothing of this ingest was written: {why}; run it again"

    def _drop_stage_quietly(self, stage: str) -> None:
        try:
            self.drop_stage(stage)
        except Exception as exc:  # the stage stays invisible; reconcile drops it once stale
            log.warning("ingest_stage_left", stage=stage, error=str(exc)[:300])

    def drop_stage(self, stage: str) -> None:
        """Remove one stage: its episodes, the entities only they used, then the stage itself."""
        while int(self._write(Q_DROP_STAGED, {"stage": stage})[0]["n"]) > 0:
            pass
        self._write(Q_DROP_STAGE_ENTITIES, {"stage": stage})
        self._write(Q_UNMARK_STAGE_ENTITIES, {"stage": stage})

    def drop_stale_stages(self, older_than_s: float = STAGE_STALE_AFTER_S) -> int:
        """Stages no batch touched for ``older_than_s`` (by the graph's clock): their writer is gone."""
        tokens = [r["token"] for r in self._read(Q_STALE_STAGES, {"age_ms": int(older_than_s * 1000)})]
        for token in tokens:
            self.drop_stage(token)
            log.warning("ingest_stage_dropped", stage=token, reason="stale")
        return len(tokens)

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        out: list[Episode] = []
        for part in chunks(list(ids), self._batch * 4):
            rows = self._read(Q_GET_EPISODES, {"ids": list(part)})
            out.extend(self._models("episode", (r["p"] for r in rows), episode_from_props))
        return out

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        live = _live(kind)
        out: dict[str, str] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(Q_LIVE_TEXTS[kind], {"ids": list(part), "team": team, "live": live}):
                if isinstance(r["text"], str) and r["text"].strip():
                    out[r["id"]] = r["text"]
                else:  # nothing to embed: a live item without text is unreadable
                    self._poison.add(Poisoned(kind, r["id"], team, "a live item without text"))
        return out

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        rows = self._read(Q_LIVE_IDS[kind], {"team": team, "live": _live(kind)})
        return {i for r in rows for i in r["ids"] or []}

    def teams(self) -> list[str]:
        # A team name no valid episode could carry (written by hand) would break every step's collections.
        return sorted({r["team"] for r in self._read(Q_TEAMS) if isinstance(r["team"], str) and _TEAM.match(r["team"])})

    def counts(self) -> GraphCounts:
        by: dict[str, dict[str, int]] = {}
        for label, q in Q_COUNT_BY_STATUS.items():
            # An ingest in flight is not part of the store yet.
            by[label] = {str(r["status"]): int(r["n"]) for r in self._read(q) if r["status"] != STAGED}
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
