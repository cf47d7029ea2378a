"""Patterns and contradictions in memory: the same observable behaviour as ``stores/cypher``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.core.errors import NotFound
from taskzilla_sleep.core.models import (
    Contradiction,
    ContradictionKind,
    ContradictionStatus,
    EpisodeStatus,
    Pattern,
    PatternStatus,
)
from taskzilla_sleep.stores.memory.base import COMPATIBLE_WITH, MERGED_INTO, REFINES, SUPERSEDES, UNRELATED_TO
from taskzilla_sleep.stores.memory.episodes import MemoryEpisodes
from taskzilla_sleep.stores.ports import (
    EpisodeUpdate,
    LinkRelation,
    PatternCard,
    PatternEdges,
    PatternLink,
    PatternUpdate,
)

_LINK_TYPES: dict[str, str] = {"refines": REFINES, "compatible": COMPATIBLE_WITH}


def _by_creation(patterns: list[Pattern]) -> list[Pattern]:
    return sorted((p.model_copy() for p in patterns), key=lambda p: (p.created_at, p.id))


class MemoryBeliefs(MemoryEpisodes):
    # -- patterns --------------------------------------------------------------------------------
    def _readable(self, p: Pattern) -> bool:
        return p.status is not PatternStatus.QUARANTINED

    def patterns(self, team: str) -> list[Pattern]:
        with self._lock:
            return _by_creation([p for p in self.pattern_nodes.values() if p.team == team and self._readable(p)])

    def patterns_by_id(self, ids: Sequence[str]) -> list[Pattern]:
        with self._lock:
            found = [self.pattern_nodes[i] for i in dict.fromkeys(ids) if i in self.pattern_nodes]
            return _by_creation([p for p in found if self._readable(p)])

    def pattern_cards(self, ids: Sequence[str]) -> dict[str, PatternCard]:
        return {
            p.id: PatternCard(
                id=p.id,
                statement=p.statement,
                status=p.status,
                pinned=p.pinned,
                subjects=tuple(p.subjects),
                confidence=p.confidence,
                support_count=p.support_count,
            )
            for p in self.patterns_by_id(ids)
        }

    def write_pattern(self, pattern: Pattern, subject_keys: Sequence[str], evidence: Sequence[EpisodeUpdate]) -> None:
        with self._lock:
            self._maybe_fail()
            self.pattern_nodes[pattern.id] = pattern.model_copy()
            for key in subject_keys:
                self.entities.setdefault(key, {"team": None, "kind": None, "name": None})
                self.about.add((pattern.id, key))
            self._link_evidence(pattern.id, evidence)

    def _link_evidence(self, pattern_id: str, evidence: Sequence[EpisodeUpdate]) -> None:
        for u in evidence:
            if u.id in self.episode_nodes:
                self.evidence.add((pattern_id, u.id))
                self._apply(u)

    def update_patterns(self, updates: Sequence[PatternUpdate]) -> None:
        with self._lock:
            self._maybe_fail()
            for u in updates:
                if u.id in self.pattern_nodes:
                    self.pattern_nodes[u.id] = self._updated(self.pattern_nodes[u.id], u)

    def merge_patterns(self, keep: Pattern, drop: Pattern, moved: Sequence[EpisodeUpdate], at: datetime) -> None:
        with self._lock:
            self._maybe_fail()
            if keep.id not in self.pattern_nodes or drop.id not in self.pattern_nodes:
                return
            self.pattern_nodes[keep.id], self.pattern_nodes[drop.id] = keep.model_copy(), drop.model_copy()
            self.pattern_rels.setdefault((drop.id, MERGED_INTO, keep.id), None)
            self._tombstone(drop.id, kind="pattern", team=drop.team, at=at, reason="merged", pattern_id=keep.id)
            self._link_evidence(keep.id, moved)

    def _relate(self, a: str, rel: str, b: str, prompt: str | None = None, overwrite: bool = False) -> None:
        if a in self.pattern_nodes and b in self.pattern_nodes:
            if overwrite:
                self.pattern_rels[(a, rel, b)] = prompt
            else:
                self.pattern_rels.setdefault((a, rel, b), prompt)

    def link_patterns(self, a: str, b: str, relation: LinkRelation) -> None:
        with self._lock:
            self._relate(a, _LINK_TYPES[relation], b)

    def link_unrelated(self, pairs: Sequence[tuple[str, str]], prompt_id: str) -> None:
        with self._lock:
            for a, b in pairs:
                self._relate(a, UNRELATED_TO, b, prompt_id, overwrite=True)

    def pattern_links(self, team: str) -> list[PatternLink]:
        with self._lock:
            links = [
                PatternLink(a, rel, b, prompt)
                for (a, rel, b), prompt in self.pattern_rels.items()
                if self.pattern_nodes[a].team == team
            ]
        return sorted(links, key=lambda x: (x.a, x.relation, x.b, x.prompt or ""))

    def entity_neighbours(self, pattern_id: str, live: Sequence[str]) -> list[str]:
        with self._lock:
            keys = {k for p, k in self.about if p == pattern_id}
            found = {
                p for p, k in self.about if k in keys and p != pattern_id and self.pattern_nodes[p].status.value in live
            }
        return sorted(found)

    def pattern_edges(self, team: str) -> dict[str, PatternEdges]:
        with self._lock:
            mine = {i for i, p in self.pattern_nodes.items() if p.team == team}
            about: dict[str, set[str]] = {}
            evidence: dict[str, set[str]] = {}
            for pid, key in self.about:
                if pid in mine:
                    about.setdefault(pid, set()).add(key)
            for pid, eid in self.evidence:
                if pid in mine:
                    evidence.setdefault(pid, set()).add(eid)
        return {
            pid: PatternEdges(tuple(sorted(about.get(pid, ()))), tuple(sorted(evidence.get(pid, ()))))
            for pid in sorted(set(about) | set(evidence))
        }

    def forget_pattern(self, pattern_id: str, at: datetime, by: str, reason: str) -> None:
        with self._lock:
            self._maybe_fail()
            p = self.pattern_nodes.pop(pattern_id, None)
            if p is None:
                return
            self._tombstone(pattern_id, kind="pattern", team=p.team, at=at, reason=reason)
            t = self.tombstone_nodes[pattern_id]
            if t.get("by") is None:  # a merge's tombstone takes who asked, when and why
                t.update(at=at, reason=reason, by=by)
            for eid, e in list(self.episode_nodes.items()):
                if e.status is EpisodeStatus.ABSORBED and e.absorbed_by == pattern_id:
                    self.episode_nodes[eid] = e.model_copy(
                        update={
                            "status": EpisodeStatus.RAW,
                            "schema_absorbed": 0,
                            "absorbed_at": None,
                            "absorbed_by": None,
                        }
                    )
            self.pattern_accessed.pop(pattern_id, None)
            self.about = {x for x in self.about if x[0] != pattern_id}
            self.evidence = {x for x in self.evidence if x[0] != pattern_id}
            self.pattern_rels = {k: v for k, v in self.pattern_rels.items() if pattern_id not in (k[0], k[2])}

    def restore_pattern_links(self, links: Sequence[PatternLink]) -> None:
        with self._lock:
            self._maybe_fail()
            for lk in links:
                self._relate(lk.a, lk.relation, lk.b, lk.prompt, overwrite=lk.relation == UNRELATED_TO)

    # -- contradictions --------------------------------------------------------------------------
    def patterns_in_dispute(self, ids: Sequence[str]) -> tuple[list[Pattern], list[Contradiction]]:
        patterns = self.patterns_by_id(ids)
        with self._lock:
            open_ = [
                c
                for c in self.contradiction_nodes.values()
                if c.status is ContradictionStatus.OPEN and all(i in self.pattern_nodes for i in c.pattern_ids)
            ]
        near = {p.id for p in patterns}
        near |= {i for c in open_ if near & set(c.pattern_ids) for i in c.pattern_ids}
        found = [c.model_copy() for c in open_ if near & set(c.pattern_ids)]
        return patterns, sorted(found, key=lambda c: (c.opened_at, c.id))

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        with self._lock:
            found = [
                c.model_copy()
                for c in self.contradiction_nodes.values()
                if c.status is not ContradictionStatus.QUARANTINED
                and (team is None or c.team == team)
                and (status is None or c.status.value == status)
            ]
        return sorted(found, key=lambda c: (c.opened_at, c.id))

    def get_contradiction(self, contradiction_id: str) -> Contradiction:
        with self._lock:
            c = self.contradiction_nodes.get(contradiction_id)
            if c is None or c.status is ContradictionStatus.QUARANTINED:
                raise NotFound(
                    f"no contradiction with id {contradiction_id!r} (see `taskzilla-sleep contradictions list`)"
                )
            return c.model_copy()

    def open_contradiction(self, c: Contradiction, counter: int, old_confidence: float) -> None:
        with self._lock:
            self._maybe_fail()
            old, new = self.pattern_nodes.get(c.old_pattern_id), self.pattern_nodes.get(c.new_pattern_id)
            if old is None or new is None:
                return
            if c.id not in self.contradiction_nodes:
                self.contradiction_nodes[c.id] = c.model_copy()
                if not old.pinned:
                    old = old.model_copy(
                        update={"counter_count": old.counter_count + counter, "confidence": old_confidence}
                    )
            if not old.pinned:
                old = old.model_copy(update={"status": PatternStatus.CONTESTED, "updated_at": c.opened_at})
            if not (new.pinned or c.kind is ContradictionKind.UPDATE):
                new = new.model_copy(update={"status": PatternStatus.CONTESTED, "updated_at": c.opened_at})
            self.pattern_nodes[old.id], self.pattern_nodes[new.id] = old, new

    def _all_there(self, contradiction_id: str, *pattern_ids: str) -> bool:
        """A MATCH of every node the write names, or the write does nothing."""
        return contradiction_id in self.contradiction_nodes and all(i in self.pattern_nodes for i in pattern_ids)

    def resolve_supersede(self, contradiction: Contradiction, winner: Pattern, loser: Pattern) -> None:
        with self._lock:
            self._maybe_fail()
            ids = (contradiction.id, winner.id, loser.id)
            if (
                ids[0] not in self.contradiction_nodes
                or ids[1] not in self.pattern_nodes
                or ids[2] not in self.pattern_nodes
            ):
                return
            self.contradiction_nodes[contradiction.id] = contradiction.model_copy()
            self.pattern_nodes[winner.id], self.pattern_nodes[loser.id] = winner.model_copy(), loser.model_copy()
            self.pattern_rels.setdefault((winner.id, SUPERSEDES, loser.id), None)

    def restore_contradictions(self, contradictions: Sequence[Contradiction]) -> None:
        with self._lock:
            self._maybe_fail()
            for c in contradictions:
                self.contradiction_nodes.setdefault(c.id, c.model_copy())

    def resolve_keep_both(self, contradiction: Contradiction, a: PatternUpdate, b: PatternUpdate) -> None:
        with self._lock:
            self._maybe_fail()
            if (
                contradiction.id not in self.contradiction_nodes
                or a.id not in self.pattern_nodes
                or b.id not in self.pattern_nodes
            ):
                return
            self.contradiction_nodes[contradiction.id] = contradiction.model_copy()
            for u in (a, b):
                self.pattern_nodes[u.id] = self._updated(self.pattern_nodes[u.id], u)
