"""Cypher for the nightly cycle, shared by Neo4j and FalkorDB (same dialect rules as cypher.py).

Each write that must not be half-done is ONE query (one transaction on Neo4j, one atomic query on
FalkorDB): a pattern with its evidence links and the absorption of its episodes; a merge; a
contradiction with its beliefs marked contested; a batch of retirements with their tombstones.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from taskzilla_sleep.models import (
    Contradiction,
    ContradictionKind,
    Episode,
    Pattern,
    PatternStatus,
    Run,
    from_ms,
    to_ms,
)
from taskzilla_sleep.stores.graph import Poisoned, PoisonKind, PoisonLog

Row = dict[str, Any]
T = TypeVar("T")

# What turning stored props into a model raises when a value is out of range, of the wrong type or
# missing (written by an older version or by hand): the item is skipped and quarantined, never fatal.
UNREADABLE = (ValueError, TypeError, KeyError, OverflowError, AttributeError)
QUARANTINED = "quarantined"


@dataclass(frozen=True)
class PatternCard:
    """A pattern as recall shows it."""

    id: str
    statement: str
    status: PatternStatus
    pinned: bool
    subjects: tuple[str, ...]
    confidence: float
    support_count: int


Q_EPISODES_IN_WINDOW = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses AND e.ts > $from AND e.ts <= $to
RETURN properties(e) AS p
"""

# Arrived since the last nightly distill (``distilled_at`` unset) but timestamped before the window.
# ``$legacy``: stores of versions without ``distilled_at`` count what their last night covered.
Q_PENDING_RAW_BEFORE = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ts <= $before AND e.distilled_at IS NULL
  AND (e.ts > $legacy OR e.ingested_at > $legacy)
RETURN properties(e) AS p
"""

Q_EPISODES_BY_STATUS = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses
RETURN properties(e) AS p
"""

# Prune reads only the stale candidates (not every raw episode): last touched = max(ts, ingested_at,
# last_accessed) at or before the cutoff. The step re-checks each one with the pure policy.
Q_STALE_RAW = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ts <= $cutoff AND e.ingested_at <= $cutoff
  AND (e.last_accessed IS NULL OR e.last_accessed <= $cutoff) AND coalesce(e.pinned, false) = false
RETURN properties(e) AS p
"""

Q_COUNT_EPISODES = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses
RETURN count(e) AS n
"""

Q_EPISODE_ENTITIES = """
UNWIND $ids AS id
MATCH (e:Episode {id: id})-[m:MENTIONS]->(n:Entity)
RETURN e.id AS id, n.key AS key, n.kind AS kind, n.name AS name, m.role AS role
"""

Q_EVIDENCE_IDS = """
MATCH (p:Pattern)-[:EVIDENCED_BY]->(e:Episode)
WHERE p.team = $team
RETURN DISTINCT e.id AS id
"""

Q_PATTERNS = """
MATCH (p:Pattern)
WHERE p.team = $team
RETURN properties(p) AS p
"""

Q_PATTERNS_BY_ID = """
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
RETURN properties(p) AS p
"""

# What recall shows of a pattern: not its evidence list, which grows with every night.
Q_PATTERN_CARDS = """
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
RETURN p.id AS id, p.team AS team, p.statement AS statement, p.status AS status, p.pinned AS pinned,
       p.subjects AS subjects, p.confidence AS confidence, p.support_count AS support_count
"""

Q_WRITE_PATTERN = """
MERGE (p:Pattern {id: $id})
SET p += $props
FOREACH (k IN $subject_keys | MERGE (n:Entity {key: k}) MERGE (p)-[:ABOUT]->(n))
WITH p
UNWIND $evidence AS row
MATCH (e:Episode {id: row.id})
MERGE (p)-[:EVIDENCED_BY]->(e)
SET e += row.set
"""

Q_SET_EPISODES = """
UNWIND $rows AS row
MATCH (e:Episode {id: row.id})
SET e += row.set
"""

Q_SET_PATTERNS = """
UNWIND $rows AS row
MATCH (p:Pattern {id: row.id})
SET p += row.set
"""

Q_RETIRE_EPISODES = """
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
SET e.status = r.status, e.text = null, e.retired_at = r.at
MERGE (t:Tombstone {id: r.id})
ON CREATE SET t.kind = 'episode', t.team = e.team, t.at = r.at, t.reason = r.reason, t.pattern_id = r.pattern_id
"""

Q_MERGE_PATTERNS = """
MATCH (keep:Pattern {id: $keep}), (drop:Pattern {id: $drop})
SET keep += $keep_props, drop += $drop_props
MERGE (drop)-[:MERGED_INTO]->(keep)
MERGE (t:Tombstone {id: $drop})
ON CREATE SET t.kind = 'pattern', t.team = drop.team, t.at = $at, t.reason = 'merged', t.pattern_id = $keep
WITH keep
UNWIND $moved AS row
MATCH (e:Episode {id: row.id})
MERGE (keep)-[:EVIDENCED_BY]->(e)
SET e += row.set
"""

Q_LINK = {
    "refines": "MATCH (a:Pattern {id: $a}), (b:Pattern {id: $b}) MERGE (a)-[:REFINES]->(b)",
    "compatible": "MATCH (a:Pattern {id: $a}), (b:Pattern {id: $b}) MERGE (a)-[:COMPATIBLE_WITH]->(b)",
}

Q_OPEN_CONTRADICTION = """
MATCH (o:Pattern {id: $old}), (n:Pattern {id: $new})
MERGE (c:Contradiction {id: $id})
ON CREATE SET c += $props,
    o.counter_count = CASE WHEN o.pinned THEN o.counter_count ELSE coalesce(o.counter_count, 0) + $counter END,
    o.confidence = CASE WHEN o.pinned THEN o.confidence ELSE $old_confidence END
MERGE (c)-[:OLD_BELIEF]->(o)
MERGE (c)-[:NEW_BELIEF]->(n)
SET o.status = CASE WHEN o.pinned THEN o.status ELSE 'contested' END,
    n.status = CASE WHEN n.pinned OR $update THEN n.status ELSE 'contested' END,
    o.updated_at = CASE WHEN o.pinned THEN o.updated_at ELSE $at END,
    n.updated_at = CASE WHEN n.pinned OR $update THEN n.updated_at ELSE $at END
"""

Q_RESOLVE_SUPERSEDE = """
MATCH (c:Contradiction {id: $c.id}), (w:Pattern {id: $w.id}), (l:Pattern {id: $l.id})
SET c += $c, w += $w, l += $l
MERGE (w)-[:SUPERSEDES]->(l)
"""

Q_RESOLVE_BOTH = """
MATCH (c:Contradiction {id: $c.id}), (a:Pattern {id: $a.id}), (b:Pattern {id: $b.id})
SET c += $c, a += $a, b += $b
"""

Q_CONTRADICTIONS = """
MATCH (c:Contradiction)
WHERE ($team IS NULL OR c.team = $team) AND ($status IS NULL OR c.status = $status)
RETURN properties(c) AS c
"""

Q_PATTERN_NEIGHBOURS_BY_ENTITY = """
MATCH (p:Pattern {id: $id})-[:ABOUT]->(n:Entity)<-[:ABOUT]-(q:Pattern)
WHERE q.id <> p.id AND q.status IN $live
RETURN DISTINCT q.id AS id
"""

Q_LINKS_OF = """
MATCH (a:Pattern)-[r]->(b:Pattern)
WHERE a.team = $team
RETURN a.id AS a, type(r) AS rel, b.id AS b, r.prompt AS prompt
"""

# A pair the model called unrelated, with the prompt that said so: not asked again under that prompt.
Q_LINK_UNRELATED = """
UNWIND $rows AS row
MATCH (a:Pattern {id: row.a}), (b:Pattern {id: row.b})
MERGE (a)-[r:UNRELATED_TO]->(b)
SET r.prompt = $prompt
"""

Q_COUNT_NEW_RAW = """
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ingested_at > $since AND e.provenance <> 'ai-draft'
RETURN count(e) AS n
"""

Q_GET_META = "MATCH (m:Meta {key: $key}) RETURN m.value AS value"
Q_SET_META = "MERGE (m:Meta {key: $key}) SET m.value = $value"
# One write: a step's mark of time and the end of its journal.
Q_FINISH_JOURNAL = """
MERGE (m:Meta {key: $key}) SET m.value = $value
MERGE (j:Meta {key: $journal}) SET j.value = ''
"""
# One write: reflect's per-pattern bookkeeping and its watermark.
Q_SET_PATTERNS_AND_META = """
MERGE (m:Meta {key: $key}) SET m.value = $value
WITH m
UNWIND $rows AS row
MATCH (p:Pattern {id: row.id})
SET p += row.set
"""

Q_SAVE_RUN = "MERGE (r:Run {id: $id}) SET r += $props"
Q_RUNS = "MATCH (r:Run) RETURN properties(r) AS r ORDER BY r.started_at DESC LIMIT $n"
Q_SLOT_DONE = "MATCH (r:Run) WHERE r.slot = $slot AND r.ok = true RETURN count(r) AS n"
Q_UNFINISHED_RUNS = "MATCH (r:Run) WHERE r.finished_at IS NULL RETURN properties(r) AS r"

Q_MARK_EPISODES_ACCESSED = "UNWIND $ids AS id MATCH (e:Episode {id: id}) SET e.last_accessed = $at"
Q_MARK_PATTERNS_ACCESSED = "UNWIND $ids AS id MATCH (p:Pattern {id: id}) SET p.last_accessed = $at"

# A stored item that cannot be read is set aside, its status kept: every step filters on status.
Q_QUARANTINE = {
    kind: f"""
UNWIND $rows AS r
MATCH (n:{label} {{id: r.id}})
WHERE coalesce(n.status, '') <> 'quarantined'
SET n.quarantined_from = n.status, n.status = 'quarantined', n.quarantined_at = $at, n.quarantine_reason = r.reason
"""
    for kind, label in (("episode", "Episode"), ("pattern", "Pattern"), ("contradiction", "Contradiction"))
}

_PATTERN_TIMES = ("first_seen", "last_seen", "created_at", "updated_at", "valid_from", "valid_to", "archived_at")
_CON_TIMES = ("opened_at", "resolved_at")


def pattern_props(p: Pattern) -> Row:
    d = p.model_dump(mode="python")
    for k in _PATTERN_TIMES:
        d[k] = to_ms(d[k]) if d[k] is not None else None
    d["kind"] = p.kind.value
    d["status"] = p.status.value
    d["evidence"] = p.evidence.value if p.evidence is not None else None
    d["evidence_ids"] = list(p.evidence_ids)
    d["subjects"] = list(p.subjects)
    return d


def pattern_from_props(d: Row) -> Pattern:
    d = dict(d)
    d.pop("last_accessed", None)
    for k in _PATTERN_TIMES:
        if d.get(k) is not None:
            d[k] = from_ms(int(d[k]))
    d["evidence_ids"] = list(d.get("evidence_ids") or [])
    d["subjects"] = list(d.get("subjects") or [])
    return Pattern.model_validate(d)


def contradiction_props(c: Contradiction) -> Row:
    d = c.model_dump(mode="python")
    for k in _CON_TIMES:
        d[k] = to_ms(d[k]) if d[k] is not None else None
    d["status"] = c.status.value
    d["kind"] = c.kind.value
    return d


def contradiction_from_props(d: Row) -> Contradiction:
    d = dict(d)
    for k in _CON_TIMES:
        if d.get(k) is not None:
            d[k] = from_ms(int(d[k]))
    return Contradiction.model_validate(d)


def _card(r: Row) -> PatternCard:
    return PatternCard(
        id=r["id"],
        statement=str(r["statement"]),
        status=PatternStatus(r["status"]),
        pinned=bool(r["pinned"]),
        subjects=tuple(r["subjects"] or ()),
        confidence=float(r["confidence"]),
        support_count=int(r["support_count"] or 0),
    )


def why_unreadable(exc: BaseException) -> str:
    """A short reason for the log and the node (no stored text: values stay out of it)."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:3])
    if isinstance(exc, KeyError):
        return f"missing property {exc}"
    return f"{type(exc).__name__}: {exc}"[:300]


class CycleQueries:
    """Mixed into CypherGraphStore: the cycle's reads and writes, in the shared dialect."""

    @abstractmethod
    def _read(self, query: str, params: Row | None = None) -> list[Row]: ...

    @abstractmethod
    def _write(self, query: str, params: Row | None = None) -> list[Row]: ...

    _poison: PoisonLog

    # -- unreadable items ----------------------------------------------------------------------
    def _models(self, kind: PoisonKind, props: Iterable[Row], convert: Callable[[Row], T]) -> list[T]:
        """Each stored item as its model; one that cannot be is skipped and logged for quarantine."""
        out: list[T] = []
        for p in props:
            if p.get("status") == QUARANTINED:
                continue
            try:
                out.append(convert(p))
            except UNREADABLE as exc:
                team = p.get("team")
                self._poison.add(
                    Poisoned(kind, str(p.get("id")), team if isinstance(team, str) else None, why_unreadable(exc))
                )
        return out

    def take_poisoned(self) -> list[Poisoned]:
        return self._poison.take()

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        for kind, query in Q_QUARANTINE.items():
            rows = [{"id": p.id, "reason": p.reason} for p in items if p.kind == kind]
            if rows:
                self._write(query, {"rows": rows, "at": to_ms(at)})

    # -- episodes ------------------------------------------------------------------------------
    def episodes_in_window(self, team: str, statuses: Sequence[str], after: datetime, until: datetime) -> list[Episode]:
        from taskzilla_sleep.stores.cypher import episode_from_props

        rows = self._read(
            Q_EPISODES_IN_WINDOW,
            {"team": team, "statuses": list(statuses), "from": to_ms(after), "to": to_ms(until)},
        )
        return sorted(self._models("episode", (r["p"] for r in rows), episode_from_props), key=lambda e: (e.ts, e.id))

    def episodes_by_status(self, team: str, statuses: Sequence[str]) -> list[Episode]:
        from taskzilla_sleep.stores.cypher import episode_from_props

        rows = self._read(Q_EPISODES_BY_STATUS, {"team": team, "statuses": list(statuses)})
        return sorted(self._models("episode", (r["p"] for r in rows), episode_from_props), key=lambda e: (e.ts, e.id))

    def stale_raw_episodes(self, team: str, cutoff: datetime) -> list[Episode]:
        """Raw, unpinned episodes last touched (ts, ingested, read) at or before ``cutoff``."""
        from taskzilla_sleep.stores.cypher import episode_from_props

        rows = self._read(Q_STALE_RAW, {"team": team, "cutoff": to_ms(cutoff)})
        return sorted(self._models("episode", (r["p"] for r in rows), episode_from_props), key=lambda e: (e.ts, e.id))

    def pending_raw_episodes(self, team: str, before: datetime, legacy: datetime | None) -> list[Episode]:
        """Raw episodes no nightly distill has taken into account, timestamped at or before ``before``."""
        from taskzilla_sleep.stores.cypher import episode_from_props

        params = {"team": team, "before": to_ms(before), "legacy": to_ms(legacy) if legacy else -1}
        rows = self._read(Q_PENDING_RAW_BEFORE, params)
        return sorted((episode_from_props(r["p"]) for r in rows), key=lambda e: (e.ts, e.id))

    def count_episodes(self, team: str, statuses: Sequence[str]) -> int:
        return int(self._read(Q_COUNT_EPISODES, {"team": team, "statuses": list(statuses)})[0]["n"])

    def episode_entities(self, ids: Sequence[str]) -> dict[str, list[Row]]:
        out: dict[str, list[Row]] = {}
        for r in self._read(Q_EPISODE_ENTITIES, {"ids": list(ids)}):
            out.setdefault(r["id"], []).append(r)
        return out

    def count_new_raw(self, team: str, since: datetime) -> int:
        """Raw, learnable-provenance episodes ingested after ``since`` (the watchdog's trigger)."""
        return int(self._read(Q_COUNT_NEW_RAW, {"team": team, "since": to_ms(since)})[0]["n"])

    def evidence_episode_ids(self, team: str) -> set[str]:
        return {r["id"] for r in self._read(Q_EVIDENCE_IDS, {"team": team})}

    def set_episodes(self, rows: Sequence[Row]) -> None:
        if rows:
            self._write(Q_SET_EPISODES, {"rows": [dict(r) for r in rows]})

    def retire_episodes(self, rows: Sequence[Row]) -> None:
        """rows: {id, status ('retired'|'pruned'), at (ms), reason, pattern_id}. Text dropped, tombstone kept."""
        if rows:
            self._write(Q_RETIRE_EPISODES, {"rows": [dict(r) for r in rows]})

    def mark_accessed(self, episode_ids: Sequence[str], pattern_ids: Sequence[str], at: datetime) -> None:
        if episode_ids:
            self._write(Q_MARK_EPISODES_ACCESSED, {"ids": list(episode_ids), "at": to_ms(at)})
        if pattern_ids:
            self._write(Q_MARK_PATTERNS_ACCESSED, {"ids": list(pattern_ids), "at": to_ms(at)})

    # -- patterns ------------------------------------------------------------------------------
    def patterns(self, team: str) -> list[Pattern]:
        rows = self._read(Q_PATTERNS, {"team": team})
        return sorted(self._models("pattern", (r["p"] for r in rows), pattern_from_props), key=_pkey)

    def patterns_by_id(self, ids: Sequence[str]) -> list[Pattern]:
        rows = self._read(Q_PATTERNS_BY_ID, {"ids": list(ids)})
        return sorted(self._models("pattern", (r["p"] for r in rows), pattern_from_props), key=_pkey)

    def pattern_cards(self, ids: Sequence[str]) -> dict[str, PatternCard]:
        """What recall shows of each pattern (unknown ids are left out)."""
        return {c.id: c for c in self._models("pattern", self._read(Q_PATTERN_CARDS, {"ids": list(ids)}), _card)}

    def write_pattern(self, pattern: Pattern, subject_keys: Sequence[str], evidence: Sequence[Row]) -> None:
        """The pattern, its ABOUT and EVIDENCED_BY links and its episodes' absorption: one atomic write."""
        self._write(
            Q_WRITE_PATTERN,
            {
                "id": pattern.id,
                "props": pattern_props(pattern),
                "subject_keys": list(subject_keys),
                "evidence": [dict(r) for r in evidence],
            },
        )

    def set_patterns(self, rows: Sequence[Row]) -> None:
        if rows:
            self._write(Q_SET_PATTERNS, {"rows": [dict(r) for r in rows]})

    def merge_patterns(self, keep: Pattern, drop: Pattern, moved: Sequence[Row], at: datetime) -> None:
        self._write(
            Q_MERGE_PATTERNS,
            {
                "keep": keep.id,
                "drop": drop.id,
                "keep_props": pattern_props(keep),
                "drop_props": pattern_props(drop),
                "moved": [dict(r) for r in moved],
                "at": to_ms(at),
            },
        )

    def link_patterns(self, a: str, b: str, relation: str) -> None:
        self._write(Q_LINK[relation], {"a": a, "b": b})

    def pattern_links(self, team: str) -> list[tuple[str, str, str, str | None]]:
        """(a, relationship type, b, the prompt that decided it when one was recorded)."""
        return sorted(
            ((r["a"], r["rel"], r["b"], r["prompt"]) for r in self._read(Q_LINKS_OF, {"team": team})),
            key=lambda t: (t[0], t[1], t[2], t[3] or ""),
        )

    def link_unrelated(self, pairs: Sequence[tuple[str, str]], prompt_id: str) -> None:
        if pairs:
            self._write(Q_LINK_UNRELATED, {"rows": [{"a": a, "b": b} for a, b in pairs], "prompt": prompt_id})

    def entity_neighbours(self, pattern_id: str, live: Sequence[str]) -> list[str]:
        return sorted(
            r["id"] for r in self._read(Q_PATTERN_NEIGHBOURS_BY_ENTITY, {"id": pattern_id, "live": list(live)})
        )

    # -- contradictions --------------------------------------------------------------------------
    def open_contradiction(self, c: Contradiction, counter: int, old_confidence: float) -> None:
        """The old belief contested, and the new one too unless the contradiction is an update (the
        team's new practice stays usable, unconfirmed); the old one's ledger gets ``counter`` and its
        recomputed confidence."""
        self._write(
            Q_OPEN_CONTRADICTION,
            {
                "id": c.id,
                "old": c.old_pattern_id,
                "new": c.new_pattern_id,
                "props": contradiction_props(c),
                "at": to_ms(c.opened_at),
                "counter": counter,
                "old_confidence": old_confidence,
                "update": c.kind is ContradictionKind.UPDATE,
            },
        )

    def resolve_supersede(self, contradiction: Row, winner: Row, loser: Row) -> None:
        """One atomic write: the contradiction closed, the winner back, the loser archived + SUPERSEDES."""
        self._write(Q_RESOLVE_SUPERSEDE, {"c": contradiction, "w": winner, "l": loser})

    def resolve_keep_both(self, contradiction: Row, a: Row, b: Row) -> None:
        self._write(Q_RESOLVE_BOTH, {"c": contradiction, "a": a, "b": b})

    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        rows = self._read(Q_CONTRADICTIONS, {"team": team, "status": status})
        found = self._models("contradiction", (r["c"] for r in rows), contradiction_from_props)
        return sorted(found, key=lambda c: (c.opened_at, c.id))

    # -- meta and runs ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._read(Q_GET_META, {"key": key})
        return str(rows[0]["value"]) if rows and rows[0]["value"] is not None else None

    def set_meta(self, key: str, value: str) -> None:
        self._write(Q_SET_META, {"key": key, "value": value})

    def finish_journal(self, key: str, value: str, journal: str) -> None:
        """Set meta ``key`` and empty meta ``journal``, atomically."""
        self._write(Q_FINISH_JOURNAL, {"key": key, "value": value, "journal": journal})

    def set_patterns_and_meta(self, rows: Sequence[Row], key: str, value: str) -> None:
        """``rows`` as set_patterns, and meta ``key``, atomically."""
        self._write(Q_SET_PATTERNS_AND_META, {"rows": [dict(r) for r in rows], "key": key, "value": value})

    def save_run(self, run: Run) -> None:
        props = {
            "trigger": run.trigger,
            "started_at": to_ms(run.started_at),
            "finished_at": to_ms(run.finished_at) if run.finished_at else None,
            "now": to_ms(run.now),
            "dry_run": run.dry_run,
            "slot": run.slot,
            "ok": all(s.status == "ok" for s in run.steps) and run.finished_at is not None,
            "steps_json": json.dumps([s.model_dump(mode="json") for s in run.steps]),
            "extra_json": json.dumps(
                {
                    "sizes_before": run.sizes_before,
                    "sizes_after": run.sizes_after,
                    "pattern_lags_s": run.pattern_lags_s,
                    "memory_index_entries": run.memory_index_entries,
                }
            ),
        }
        self._write(Q_SAVE_RUN, {"id": run.id, "props": props})

    def slot_done(self, slot: str) -> bool:
        """Has a night for this slot (e.g. the scheduled night of 2026-11-28) finished cleanly?"""
        return int(self._read(Q_SLOT_DONE, {"slot": slot})[0]["n"]) > 0

    def runs(self, n: int) -> list[Run]:
        return [_run_from_props(r["r"]) for r in self._read(Q_RUNS, {"n": n})]

    def abandon_dead_runs(self, by: str) -> list[str]:
        """Mark the runs a dead process left unfinished (kill -9, power cut): ``abandoned``, not ``running``.

        Only the lease holder may call this: every run that writes the ledger runs under the
        lease, so while ``by`` holds it no live process is doing any of these.
        """
        marked: list[str] = []
        for r in self._read(Q_UNFINISHED_RUNS):
            run = _run_from_props(r["r"])
            if all(s.status not in ("running", "pending") for s in run.steps):
                continue  # every step recorded; only the closing save was lost
            for s in run.steps:
                if s.status == "running":
                    s.status = "abandoned"
                    s.error = f"its process stopped before the step finished (found by {by})"
                elif s.status == "pending":
                    s.status = "skipped"
            self.save_run(run)
            marked.append(run.id)
        return marked


def _run_from_props(d: dict[str, Any]) -> Run:
    return Run.model_validate(
        {
            "id": d["id"],
            "trigger": d["trigger"],
            "started_at": from_ms(int(d["started_at"])),
            "finished_at": from_ms(int(d["finished_at"])) if d.get("finished_at") else None,
            "now": from_ms(int(d["now"])),
            "dry_run": bool(d.get("dry_run", False)),
            "steps": json.loads(d.get("steps_json") or "[]"),
            "slot": d.get("slot"),
            **json.loads(d.get("extra_json") or "{}"),
        }
    )


def _pkey(p: Pattern) -> tuple[datetime, str]:
    return (p.created_at, p.id)
