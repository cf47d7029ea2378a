"""Patterns in the graph: reads, the atomic pattern write, merges and the links between patterns."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.core.models import Pattern, to_ms
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import card_from_row, pattern_from_props, pattern_props, update_row
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.ports import (
    EpisodeUpdate,
    LinkRelation,
    PatternCard,
    PatternEdges,
    PatternLink,
    PatternUpdate,
)

Q = queries.load("patterns")


def by_creation(p: Pattern) -> tuple[datetime, str]:
    return (p.created_at, p.id)


class CypherPatterns(CypherBase):
    def patterns(self, team: str) -> list[Pattern]:
        rows = self._read(Q["patterns"], {"team": team})
        return sorted(self._models("pattern", (r["p"] for r in rows), pattern_from_props), key=by_creation)

    def patterns_by_id(self, ids: Sequence[str]) -> list[Pattern]:
        rows = self._read(Q["patterns_by_id"], {"ids": list(ids)})
        return sorted(self._models("pattern", (r["p"] for r in rows), pattern_from_props), key=by_creation)

    def pattern_cards(self, ids: Sequence[str]) -> dict[str, PatternCard]:
        rows = self._read(Q["pattern_cards"], {"ids": list(ids)})
        return {c.id: c for c in self._models("pattern", rows, card_from_row)}

    def write_pattern(self, pattern: Pattern, subject_keys: Sequence[str], evidence: Sequence[EpisodeUpdate]) -> None:
        params = {
            "id": pattern.id,
            "props": pattern_props(pattern),
            "subject_keys": list(subject_keys),
            "evidence": [update_row(u) for u in evidence],
        }
        self._write(Q["write_pattern"], params)

    def update_patterns(self, updates: Sequence[PatternUpdate]) -> None:
        if updates:
            self._write(Q["update_patterns"], {"rows": [update_row(u) for u in updates]})

    def merge_patterns(self, keep: Pattern, drop: Pattern, moved: Sequence[EpisodeUpdate], at: datetime) -> None:
        params = {
            "keep": keep.id,
            "drop": drop.id,
            "keep_props": pattern_props(keep),
            "drop_props": pattern_props(drop),
            "moved": [update_row(u) for u in moved],
            "at": to_ms(at),
        }
        self._write(Q["merge_patterns"], params)

    def link_patterns(self, a: str, b: str, relation: LinkRelation) -> None:
        self._write(Q[f"link_{relation}"], {"a": a, "b": b})

    def link_unrelated(self, pairs: Sequence[tuple[str, str]], prompt_id: str) -> None:
        if pairs:
            self._write(Q["link_unrelated"], {"rows": [{"a": a, "b": b} for a, b in pairs], "prompt": prompt_id})

    def pattern_links(self, team: str) -> list[PatternLink]:
        rows = self._read(Q["pattern_links"], {"team": team})
        links = [PatternLink(r["a"], r["rel"], r["b"], r["prompt"]) for r in rows]
        return sorted(links, key=lambda x: (x.a, x.relation, x.b, x.prompt or ""))

    def entity_neighbours(self, pattern_id: str, live: Sequence[str]) -> list[str]:
        return sorted(r["id"] for r in self._read(Q["entity_neighbours"], {"id": pattern_id, "live": list(live)}))

    def pattern_edges(self, team: str) -> dict[str, PatternEdges]:
        about: dict[str, set[str]] = {}
        evidence: dict[str, set[str]] = {}
        for r in self._read(Q["pattern_edges"], {"team": team}):
            (about if r["rel"] == "ABOUT" else evidence).setdefault(r["id"], set()).add(str(r["target"]))
        return {
            pid: PatternEdges(tuple(sorted(about.get(pid, ()))), tuple(sorted(evidence.get(pid, ()))))
            for pid in sorted(set(about) | set(evidence))
        }

    def forget_pattern(self, pattern_id: str, at: datetime, by: str, reason: str) -> None:
        self._write(Q["forget_pattern"], {"id": pattern_id, "at": to_ms(at), "by": by, "reason": reason})

    def restore_pattern_links(self, links: Sequence[PatternLink]) -> None:
        rows = [{"a": lk.a, "rel": lk.relation, "b": lk.b, "prompt": lk.prompt} for lk in links]
        for i in range(0, len(rows), self._batch):
            self._write(Q["restore_pattern_links"], {"rows": rows[i : i + self._batch]})
