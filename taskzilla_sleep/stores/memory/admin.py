"""The in-memory graph as a whole: health, sizes, quarantine and wiping."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.core.models import (
    PATTERN_LIVE,
    TEAM_RE,
    ContradictionStatus,
    EpisodeStatus,
    PatternStatus,
    Tombstone,
)
from taskzilla_sleep.stores.memory.archive import MemoryArchive
from taskzilla_sleep.stores.memory.base import MemoryBase
from taskzilla_sleep.stores.memory.sessions import MemorySessions
from taskzilla_sleep.stores.ports import GraphBackend, GraphCounts, Poisoned, TeamCounts

_TEAM = re.compile(TEAM_RE)


class MemoryGraphStore(MemoryArchive, MemorySessions):
    """Implements ``ports.GraphStore`` in memory (unit tests; the contract suite holds it to the real ones)."""

    backend: GraphBackend = "falkordb"  # behaves like the embedded default

    def describe(self) -> str:
        return "memory graph"

    def ping(self) -> None:
        self._maybe_fail()

    def ensure_schema(self) -> None:
        self._maybe_fail()

    def teams(self) -> list[str]:
        with self._lock:
            names = {e.team for e in self.episode_nodes.values()} | {p.team for p in self.pattern_nodes.values()}
        return sorted(t for t in names if _TEAM.match(t))

    def team_counts(self) -> dict[str, TeamCounts]:
        with self._lock:
            self._maybe_fail()
            live = Counter(p.team for p in self.pattern_nodes.values() if p.status in PATTERN_LIVE)
            opened = Counter(c.team for c in self.contradiction_nodes.values() if c.status == ContradictionStatus.OPEN)
        return {
            t: TeamCounts(patterns_live=live[t], contradictions_open=opened[t])
            for t in sorted(live.keys() | opened.keys())
            if _TEAM.match(t)
        }

    def has_team(self, team: str) -> bool:
        with self._lock:
            return any(e.team == team for e in self.episode_nodes.values()) or any(
                p.team == team for p in self.pattern_nodes.values()
            )

    def counts(self, team: str | None = None) -> GraphCounts:
        with self._lock:
            mine = (lambda t: True) if team is None else (lambda t: t == team)
            episodes = dict(Counter(e.status.value for e in self.episode_nodes.values() if mine(e.team)))
            patterns = dict(Counter(p.status.value for p in self.pattern_nodes.values() if mine(p.team)))
            contradictions = dict(Counter(c.status.value for c in self.contradiction_nodes.values() if mine(c.team)))
            tombstones = sum(1 for t in self.tombstone_nodes.values() if mine(t.get("team")))
            a = self.archive_counts(team)
            archived = {"archived_items": a.items, "archived_texts": a.texts, "archived_bytes": a.bytes}
            if team is not None:  # entities and relationships are counted for the whole store only
                return GraphCounts(
                    episodes=episodes,
                    patterns=patterns,
                    contradictions=contradictions,
                    entities=None,
                    tombstones=tombstones,
                    relationships=None,
                    **archived,
                )
            return GraphCounts(
                episodes=episodes,
                patterns=patterns,
                contradictions=contradictions,
                entities=len(self.entities),
                tombstones=tombstones,
                relationships=len(self.mentions)
                + len(self.about)
                + len(self.evidence)
                + len(self.pattern_rels)
                + sum(i in self.pattern_nodes for c in self.contradiction_nodes.values() for i in c.pattern_ids)
                + len(self.alert_for)
                + len(self.reply_links),
                **archived,
            )

    def take_poisoned(self) -> list[Poisoned]:
        return []  # it holds models, never unreadable properties

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        with self._lock:
            for p in items:
                if p.kind == "episode" and p.id in self.episode_nodes:
                    e = self.episode_nodes[p.id]
                    self.quarantined_from[(p.kind, p.id)] = e.status.value
                    self.episode_nodes[p.id] = e.model_copy(update={"status": EpisodeStatus.QUARANTINED})
                elif p.kind == "pattern" and p.id in self.pattern_nodes:
                    x = self.pattern_nodes[p.id]
                    self.quarantined_from[(p.kind, p.id)] = x.status.value
                    self.pattern_nodes[p.id] = x.model_copy(update={"status": PatternStatus.QUARANTINED})
                elif p.kind == "contradiction" and p.id in self.contradiction_nodes:
                    c = self.contradiction_nodes[p.id]
                    self.quarantined_from[(p.kind, p.id)] = c.status.value
                    self.contradiction_nodes[p.id] = c.model_copy(update={"status": ContradictionStatus.QUARANTINED})

    def delete_all(self) -> None:
        MemoryBase.__init__(self)

    def tombstones(self, team: str) -> list[Tombstone]:
        with self._lock:
            found = [Tombstone.model_validate(t) for t in self.tombstone_nodes.values() if t.get("team") == team]
        return sorted(found, key=lambda t: (t.at, t.id))

    def restore_tombstones(self, tombstones: Sequence[Tombstone]) -> None:
        with self._lock:
            self._maybe_fail()
            for t in tombstones:
                self.tombstone_nodes.setdefault(t.id, t.model_dump(exclude_none=True))

    def delete_team(self, team: str) -> None:
        with self._lock:
            self._maybe_fail()
            eps = {i for i, e in self.episode_nodes.items() if e.team == team}
            pats = {i for i, p in self.pattern_nodes.items() if p.team == team}
            cons = {i for i, c in self.contradiction_nodes.items() if c.team == team}
            keys = {k for k, v in self.entities.items() if v.get("team") == team or k.startswith(f"{team}/")}
            alerts = {k for k, a in self.outbox.items() if a.team == team}
            for i in eps:
                del self.episode_nodes[i]
                self.hashes.pop(i, None)
                self.ingest_of.pop(i, None)
            for i in pats:
                del self.pattern_nodes[i]
                self.pattern_accessed.pop(i, None)
            for i in cons:
                del self.contradiction_nodes[i]
            for k in keys:
                del self.entities[k]
            for k in alerts:
                del self.outbox[k]
            self.tombstone_nodes = {i: t for i, t in self.tombstone_nodes.items() if t.get("team") != team}
            self.mentions = {m for m in self.mentions if m[0] not in eps and m[1] not in keys}
            self.about = {x for x in self.about if x[0] not in pats and x[1] not in keys}
            self.evidence = {x for x in self.evidence if x[0] not in pats and x[1] not in eps}
            self.reply_links = {x for x in self.reply_links if x[0] not in eps and x[1] not in eps}
            self.edit_pending = {i: t for i, t in self.edit_pending.items() if i not in eps}
            self.pattern_rels = {k: v for k, v in self.pattern_rels.items() if k[0] not in pats and k[2] not in pats}
            self.alert_for = {x for x in self.alert_for if x[0] not in alerts and x[1] not in cons}
            self.meta = {k: v for k, v in self.meta.items() if not k.endswith(f":{team}")}
            self.quarantined_from = {k: v for k, v in self.quarantined_from.items() if k[1] not in eps | pats | cons}
            self.archived = {k: a for k, a in self.archived.items() if a.team != team}
            self.change_nodes = {i: c for i, c in self.change_nodes.items() if c.teams != (team,)}

    def close(self) -> None:
        pass
