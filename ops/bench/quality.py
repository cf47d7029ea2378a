"""Quality on the synthetic gold (``generate.py``'s labels) read back from the stores.

- **habits**: a habit is *found* when one active or contested pattern's evidence is mostly (more
  than half) that habit's episodes. Recall = found / expected (habits stated ≥ 3 times by the day
  evaluated); precision = learned patterns (active or contested, not pinned) that map to a habit /
  all of them.
- **contradictions**: one is *right* when its two beliefs map to the old and new habit of a planted
  change. Recall = changes with a right contradiction / changes expected; precision = right / opened.
- **retired only after absorption + grace**: every retired episode was absorbed (``schema_absorbed=1``),
  its ``retired_at`` is at least the grace after its ``absorbed_at``, and its tombstone names the
  pattern that absorbed it.
- **pinned facts touched**: pinned facts whose stored pattern differs from the one pinned.
- **ai-drafts learned**: ai-draft episodes that are evidence of a pattern or were absorbed/retired.
- **episodes lost**: ingested ids that are not in the graph as raw/absorbed/retired/pruned, or are
  retired/pruned without a tombstone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ops.bench import compat
from taskzilla_sleep.core.models import Pattern, PatternStatus

Q_EPISODE_STATES = """
MATCH (e:Episode) WHERE e.team = $team
RETURN e.id AS id, e.status AS status, e.provenance AS provenance, e.schema_absorbed AS absorbed,
       e.absorbed_at AS absorbed_at, e.absorbed_by AS absorbed_by, e.retired_at AS retired_at
"""
Q_TOMBSTONES = """
MATCH (t:Tombstone) WHERE t.team = $team
RETURN t.id AS id, t.kind AS kind, t.reason AS reason, t.pattern_id AS pattern_id
"""
KNOWN = {"raw", "absorbed", "retired", "pruned"}


@dataclass
class Quality:
    day: int
    habits_expected: int = 0
    habits_found: int = 0
    habit_recall: float = 0.0
    patterns_learned: int = 0  # active or contested, not pinned
    patterns_on_a_habit: int = 0
    habit_precision: float = 0.0
    patterns_tentative: int = 0
    duplicate_patterns: int = 0  # extra patterns of a habit already found
    changes_expected: int = 0
    changes_found: int = 0
    contradiction_recall: float = 0.0
    contradictions_opened: int = 0
    contradictions_right: int = 0
    contradiction_precision: float = 0.0
    retired: int = 0
    retired_badly: int = 0
    pinned_facts: int = 0
    pinned_facts_touched: int = 0
    ai_drafts: int = 0
    ai_drafts_learned: int = 0
    episodes_expected: int = 0
    episodes_lost: int = 0
    skipped_stored: int = 0  # write-discipline items that made it into the graph anyway
    episodes_skipped: int = 0  # skipped by the configured write discipline (github links, chatter)
    signal_skipped: int = 0  # planted habits, facts or drafts the write discipline skipped: must be 0
    rederivable_stored: int = 0  # planted github links the write discipline let through: must be 0
    by_status: dict[str, int] = field(default_factory=dict)
    missed_habits: list[str] = field(default_factory=list)
    stray_patterns: list[str] = field(default_factory=list)  # learned patterns that map to no habit
    wrong_contradictions: list[str] = field(default_factory=list)  # "old habit | new habit" of the wrong ones
    missed_changes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(
    gold: Mapping[str, Any],
    graph: Any,
    *,
    upto_day: int,
    pinned: Sequence[Pattern],
    grace_hours: float,
) -> Quality:
    """Quality of the stores after the night that follows day ``upto_day`` (0-based)."""
    team = str(gold["team"])
    q = Quality(day=upto_day)

    def day_of(eid: str) -> int:
        return int(eid.split("-")[1][1:])

    habit_eps: dict[str, set[str]] = {
        h["key"]: {i for i in h["episodes"] if day_of(i) <= upto_day} for h in gold["habits"]
    }
    owner = {i: k for k, ids in habit_eps.items() for i in ids}
    expected = {k for k, ids in habit_eps.items() if len(ids) >= 3}

    patterns = graph.patterns(team)
    mapped = {p.id: _majority(p.evidence_ids, owner) for p in patterns}
    learned = [p for p in patterns if not p.pinned and p.status in (PatternStatus.ACTIVE, PatternStatus.CONTESTED)]
    q.patterns_learned = len(learned)
    q.patterns_tentative = sum(1 for p in patterns if p.status is PatternStatus.TENTATIVE)
    per_habit = Counter(mapped[p.id] for p in learned if mapped[p.id] is not None)
    q.patterns_on_a_habit = sum(per_habit.values())
    q.habits_expected = len(expected)
    q.habits_found = len(expected & set(per_habit))
    q.duplicate_patterns = sum(n - 1 for n in per_habit.values())
    q.habit_recall = _ratio(q.habits_found, q.habits_expected)
    q.habit_precision = _ratio(q.patterns_on_a_habit, q.patterns_learned)
    q.missed_habits = sorted(expected - set(per_habit))
    q.stray_patterns = [p.statement[:90] for p in learned if mapped[p.id] is None][:20]

    changes = [c for c in gold["changes"] if c["day"] <= upto_day and c["old"] in expected and c["new"] in expected]
    pairs = {frozenset((c["old"], c["new"])): c["key"] for c in changes}
    found_changes: set[str] = set()
    cons = graph.contradictions(team)
    for c in cons:
        key = pairs.get(frozenset((mapped.get(c.old_pattern_id), mapped.get(c.new_pattern_id))))
        if key is not None:
            q.contradictions_right += 1
            found_changes.add(key)
        else:
            q.wrong_contradictions.append(f"{mapped.get(c.old_pattern_id)} | {mapped.get(c.new_pattern_id)}")
    q.missed_changes = sorted({c["key"] for c in changes} - found_changes)
    q.changes_expected = len(changes)
    q.changes_found = len(found_changes)
    q.contradictions_opened = len(cons)
    q.contradiction_recall = _ratio(q.changes_found, q.changes_expected)
    q.contradiction_precision = _ratio(q.contradictions_right, q.contradictions_opened)

    states = {r["id"]: r for r in compat.read(graph, Q_EPISODE_STATES, {"team": team})}
    tombs = {r["id"]: r for r in compat.read(graph, Q_TOMBSTONES, {"team": team}) if r["kind"] == "episode"}
    q.by_status = dict(sorted(Counter(str(r["status"]) for r in states.values()).items()))
    grace_ms = grace_hours * 3600 * 1000
    for r in states.values():
        if r["status"] != "retired":
            continue
        q.retired += 1
        t = tombs.get(r["id"])
        ok = (
            r["absorbed"] == 1
            and r["absorbed_at"] is not None
            and r["retired_at"] is not None
            and r["retired_at"] - r["absorbed_at"] >= grace_ms
            and t is not None
            and t["reason"] == "absorbed"
            and t["pattern_id"] == r["absorbed_by"]
        )
        q.retired_badly += 0 if ok else 1

    now = {p.id: p for p in graph.patterns_by_id([p.id for p in pinned])}
    q.pinned_facts = len(pinned)
    q.pinned_facts_touched = sum(1 for p in pinned if now.get(p.id) != p)

    drafts = {i for i in gold["ai_drafts"] if day_of(i) <= upto_day}
    evidence = {i for p in patterns for i in p.evidence_ids}
    q.ai_drafts = len(drafts)
    q.ai_drafts_learned = sum(
        1 for i in drafts if i in evidence or (i in states and states[i]["status"] in ("absorbed", "retired"))
    )

    # What the configured write discipline skips (the planted github links + content-free chatter):
    # never stored, so never lost; but a planted habit, fact or draft must never be skipped.
    skipped = set(gold.get("skipped_by_config", gold["skipped_by_write_discipline"]))
    ingested = [i for i in _ids(gold, upto_day) if i not in skipped]
    q.episodes_expected = len(ingested)
    q.episodes_skipped = sum(1 for i in skipped if day_of(i) <= upto_day)
    q.skipped_stored = sum(1 for i in skipped if day_of(i) <= upto_day and i in states)
    signal = set(owner) | set(gold["ai_drafts"]) | set(gold["fact_declarations"])
    q.signal_skipped = sum(1 for i in skipped & signal if day_of(i) <= upto_day)
    q.rederivable_stored = sum(
        1 for i in gold["skipped_by_write_discipline"] if day_of(i) <= upto_day and i not in skipped
    )
    for i in ingested:
        r = states.get(i)
        if r is None or r["status"] not in KNOWN or (r["status"] in ("retired", "pruned") and i not in tombs):
            q.episodes_lost += 1
    return q


def _ids(gold: Mapping[str, Any], upto_day: int) -> Iterable[str]:
    per_day = gold["episodes_per_day"]
    for d in range(min(upto_day + 1, len(per_day))):
        for n in range(per_day[d]):
            yield f"syn-d{d:02d}-{n:05d}"


def _majority(evidence: Sequence[str], owner: Mapping[str, str]) -> str | None:
    if not evidence:
        return None
    counts = Counter(owner[i] for i in evidence if i in owner)
    if not counts:
        return None
    key, n = counts.most_common(1)[0]
    return key if n * 2 > len(set(evidence)) else None


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 1.0
