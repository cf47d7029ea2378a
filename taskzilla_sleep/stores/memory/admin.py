"""The in-memory graph as a whole: health, sizes, quarantine and wiping."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.models import TEAM_RE, ContradictionStatus, EpisodeStatus, PatternStatus
from taskzilla_sleep.stores.memory.base import MemoryBase
from taskzilla_sleep.stores.memory.ops import MemoryOps
from taskzilla_sleep.stores.ports import GraphBackend, GraphCounts, Poisoned

_TEAM = re.compile(TEAM_RE)


class MemoryGraphStore(MemoryOps):
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

    def counts(self) -> GraphCounts:
        with self._lock:
            return GraphCounts(
                episodes=dict(Counter(e.status.value for e in self.episode_nodes.values())),
                patterns=dict(Counter(p.status.value for p in self.pattern_nodes.values())),
                contradictions=dict(Counter(c.status.value for c in self.contradiction_nodes.values())),
                entities=len(self.entities),
                tombstones=len(self.tombstones),
                relationships=len(self.mentions)
                + len(self.about)
                + len(self.evidence)
                + len(self.pattern_rels)
                + 2 * len(self.contradiction_nodes)
                + len(self.alert_for),
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

    def close(self) -> None:
        pass
