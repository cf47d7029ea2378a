"""The graph as a whole: health, schema, sizes, unreadable items, snapshots and wiping."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import structlog

from taskzilla_sleep.core.models import TEAM_RE, Tombstone, to_ms
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import UNREADABLE, tombstone_from_props, tombstone_props, why_unreadable
from taskzilla_sleep.stores.cypher.archive import CypherArchive
from taskzilla_sleep.stores.cypher.base import chunks
from taskzilla_sleep.stores.cypher.episodes import STAGED
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import GraphCounts, Poisoned, TeamCounts

log = structlog.get_logger(__name__)

Q = queries.load("admin")
_TEAM = re.compile(TEAM_RE)

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
    ("IngestMark", "id"),
    ("Alert", "key"),
    ("Change", "id"),
    ("Archived", "key"),
    ("ConsoleSession", "key"),
    ("SeenRequest", "key"),
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
    ("Episode", "reply_to"),  # a message arriving finds the replies that came before it
    ("Entity", "stage"),
    ("Archived", "change"),
    ("Archived", "item"),
    ("Archived", "team"),
    ("Archived", "at"),
    ("IngestMark", "expires_at"),
)


class CypherAdmin(CypherArchive):
    def describe(self) -> str:
        return self._ex.describe()

    def ping(self) -> None:
        self._read(Q["ping"])

    def ensure_schema(self) -> None:
        self._ex.ensure_schema(KEYS, INDEXES)
        log.debug("graph_schema_ensured", backend=self._ex.backend)

    def teams(self) -> list[str]:
        # A team name no valid episode could carry (written by hand) would break every step's collections.
        return sorted(
            {r["team"] for r in self._read(Q["teams"]) if isinstance(r["team"], str) and _TEAM.match(r["team"])}
        )

    def has_team(self, team: str) -> bool:
        return bool(self._read(Q["has_team"], {"team": team}))

    def counts(self, team: str | None = None) -> GraphCounts:
        by: dict[str, dict[str, int]] = {}
        scope, params = ("team_", {"team": team}) if team is not None else ("", {})
        for label in ("episodes", "patterns", "contradictions"):
            rows = self._read(Q[f"{scope}count_{label}_by_status"], params)
            # An ingest in flight is not part of the store yet.
            by[label] = {str(r["status"]): int(r["n"]) for r in rows if r["status"] != STAGED}
        tombstones = int(self._read(Q[f"{scope}count_tombstones"], params)[0]["n"])
        a = self.archive_counts(team)
        archived = {"archived_items": a.items, "archived_texts": a.texts, "archived_bytes": a.bytes}
        if team is not None:  # entities and relationships are counted for the whole store only
            return GraphCounts(
                episodes=by["episodes"],
                patterns=by["patterns"],
                contradictions=by["contradictions"],
                entities=None,
                tombstones=tombstones,
                relationships=None,
                **archived,
            )
        return GraphCounts(
            episodes=by["episodes"],
            patterns=by["patterns"],
            contradictions=by["contradictions"],
            entities=int(self._read(Q["count_entities"])[0]["n"]),
            tombstones=tombstones,
            relationships=int(self._read(Q["count_relationships"])[0]["n"]),
            **archived,
        )

    def team_counts(self) -> dict[str, TeamCounts]:
        live = {str(r["team"]): int(r["n"]) for r in self._read(Q["team_patterns_live"]) if r["team"] is not None}
        opened = {
            str(r["team"]): int(r["n"]) for r in self._read(Q["team_contradictions_open"]) if r["team"] is not None
        }
        return {
            t: TeamCounts(patterns_live=live.get(t, 0), contradictions_open=opened.get(t, 0))
            for t in sorted(live.keys() | opened.keys())
            if _TEAM.match(t)
        }

    def take_poisoned(self) -> list[Poisoned]:
        return self._poison.take()

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        for kind in ("episode", "pattern", "contradiction"):
            rows = [{"id": p.id, "reason": p.reason} for p in items if p.kind == kind]
            if rows:
                self._write(Q[f"quarantine_{kind}s"], {"rows": rows, "at": to_ms(at)})

    def snapshot(self, skip_labels: frozenset[str] = frozenset({"Run"})) -> dict[str, list[Any]]:
        """Every node and relationship as plain data, sorted (crash tests compare two of them) — but
        the ingests' bookkeeping: their marks and which ingest stored an episode are process ids and
        wall-clock times (as a lease's), different for every run of the same ingest."""
        nodes = [
            {"labels": sorted(r["labels"]), "props": dict(sorted(_without_ingest(r["props"]).items()))}
            for r in self._read(Q["snapshot_nodes"])
            if not (skip_labels | {"IngestMark"}) & set(r["labels"])
        ]
        rels = [
            {
                "from": [sorted(r["la"]), r["a"]],
                "type": r["type"],
                "props": dict(sorted((r["props"] or {}).items())),
                "to": [sorted(r["lb"]), r["b"]],
            }
            for r in self._read(Q["snapshot_relationships"])
            if not skip_labels & (set(r["la"]) | set(r["lb"]))
        ]
        return {"nodes": sorted(nodes, key=repr), "relationships": sorted(rels, key=repr)}

    def delete_all(self) -> None:
        while int(self._write(Q["delete_some"])[0]["n"]) > 0:
            pass

    def tombstones(self, team: str) -> list[Tombstone]:
        out: list[Tombstone] = []
        for r in self._read(Q["tombstones"], {"team": team}):
            try:
                out.append(tombstone_from_props(r["t"]))
            except UNREADABLE as exc:  # an audit record is never quarantined: logged and left out
                log.warning("tombstone_unreadable", id=str(r["t"].get("id")), reason=why_unreadable(exc))
        return sorted(out, key=lambda t: (t.at, t.id))

    def restore_tombstones(self, tombstones: Sequence[Tombstone]) -> None:
        for part in chunks(list(tombstones), self._batch):
            self._write(Q["restore_tombstones"], {"rows": [{"id": t.id, "props": tombstone_props(t)} for t in part]})

    def delete_team(self, team: str) -> None:
        params = {"team": team, "prefix": f"{team}/", "suffix": f":{team}"}
        for what in ("alerts", "contradictions", "patterns", "episodes", "tombstones", "entities", "meta"):
            while int(self._write(Q[f"delete_team_{what}"], params)[0]["n"]) > 0:
                pass
        self.delete_team_archive(team)

    def close(self) -> None:
        self._ex.close()


def _without_ingest(props: Row) -> Row:
    return {k: v for k, v in props.items() if k != "ingest"}
