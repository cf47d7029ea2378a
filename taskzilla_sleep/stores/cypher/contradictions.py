"""Contradictions in the graph: opened with both beliefs marked in one write, resolved by a person."""

from __future__ import annotations

from collections.abc import Sequence

from taskzilla_sleep.core.errors import NotFound
from taskzilla_sleep.core.models import Contradiction, ContradictionKind, Pattern, to_ms
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import (
    contradiction_from_props,
    contradiction_props,
    pattern_from_props,
    pattern_props,
    update_row,
)
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.cypher.patterns import by_creation
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import PatternUpdate

Q = queries.load("contradictions")


def _flat(u: PatternUpdate) -> Row:
    row = update_row(u)
    return {"id": row["id"], **row["set"]}


class CypherContradictions(CypherBase):
    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        rows = self._read(Q["contradictions"], {"team": team, "status": status})
        found = self._models("contradiction", (r["c"] for r in rows), contradiction_from_props)
        return sorted(found, key=lambda c: (c.opened_at, c.id))

    def patterns_in_dispute(self, ids: Sequence[str]) -> tuple[list[Pattern], list[Contradiction]]:
        rows = self._read(Q["patterns_in_dispute"], {"ids": list(ids)})
        patterns = self._models("pattern", (r["p"] for r in rows), pattern_from_props)
        props = {c["id"]: c for r in rows for c in (*r["near"], *r["far"]) if c}
        found = self._models("contradiction", props.values(), contradiction_from_props)
        return (
            sorted({p.id: p for p in patterns}.values(), key=by_creation),
            sorted(found, key=lambda c: (c.opened_at, c.id)),
        )

    def get_contradiction(self, contradiction_id: str) -> Contradiction:
        rows = self._read(Q["get_contradiction"], {"id": contradiction_id})
        found = self._models("contradiction", (r["c"] for r in rows), contradiction_from_props)
        if not found:
            raise NotFound(f"no contradiction with id {contradiction_id!r} (see `taskzilla-sleep contradictions list`)")
        return found[0]

    def open_contradiction(self, c: Contradiction, counter: int, old_confidence: float) -> None:
        params = {
            "id": c.id,
            "old": c.old_pattern_id,
            "new": c.new_pattern_id,
            "props": contradiction_props(c),
            "at": to_ms(c.opened_at),
            "counter": counter,
            "old_confidence": old_confidence,
            "update": c.kind is ContradictionKind.UPDATE,
        }
        self._write(Q["open_contradiction"], params)

    def resolve_supersede(self, contradiction: Contradiction, winner: Pattern, loser: Pattern) -> None:
        params = {"c": contradiction_props(contradiction), "w": pattern_props(winner), "l": pattern_props(loser)}
        self._write(Q["resolve_supersede"], params)

    def resolve_keep_both(self, contradiction: Contradiction, a: PatternUpdate, b: PatternUpdate) -> None:
        self._write(Q["resolve_keep_both"], {"c": contradiction_props(contradiction), "a": _flat(a), "b": _flat(b)})

    def restore_contradictions(self, contradictions: Sequence[Contradiction]) -> None:
        rows = [
            {"id": c.id, "old": c.old_pattern_id, "new": c.new_pattern_id, "props": contradiction_props(c)}
            for c in contradictions
        ]
        for i in range(0, len(rows), self._batch):
            self._write(Q["restore_contradictions"], {"rows": rows[i : i + self._batch]})
