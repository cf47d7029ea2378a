"""The graph as a change sees it: every write first archives what it is about to change.

A night's steps (and a person's resolve or release) write through :func:`recorded`. Before each
write the items it names are archived as they are (``ArchiveStore.archive_before``): the first image
of an item in a change wins, so the archive holds each item as it was before the change, whatever
the change wrote after, and a crash between the image and the write leaves an image of an unchanged
item (restoring it changes nothing). Reads pass through untouched.

What is not recorded, on purpose: the run ledger (it records the run itself), leases, the outbox
(undo withdraws alerts itself), quarantine (a repair of unreadable data, never undone), the archive's
own upkeep, and ``mark_accessed`` (recall's bookkeeping, not a decision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from taskzilla_sleep.core.models import Contradiction, Pattern
from taskzilla_sleep.stores.ports import (
    ChangeRecord,
    EpisodeUpdate,
    GraphStore,
    ItemRef,
    LinkRelation,
    PatternUpdate,
    Retirement,
)

# Every GraphStore method that writes and is not recorded, and why (tests/unit/test_archive.py
# fails when a new write method is neither recorded here nor listed).
UNRECORDED_WRITES: Mapping[str, str] = {
    "save_run": "the ledger records the run itself",
    "abandon_dead_runs": "the ledger's own bookkeeping",
    "upsert_episodes": "ingest is not a change a night makes (a message arriving)",
    "drop_stale_stages": "what an interrupted ingest left invisible",
    "edit_episodes": "ingest: a message's edit arriving (a newer text), not a change a night makes",
    "link_replies": "ingest: a reply's link to the message it answers",
    "flag_episodes": "reconcile: a message's injection flag, derived from its text by the current lint",
    "restore_episodes": "import",
    "restore_pattern_links": "import",
    "restore_contradictions": "import",
    "restore_tombstones": "import",
    "mark_accessed": "recall's bookkeeping, not a decision",
    "forget_episodes": "a person's request to erase: never undone",
    "forget_pattern": "a person's request to erase: never undone",
    "quarantine": "a repair of unreadable data, never undone",
    "delete_all": "tests and a fresh demo",
    "delete_team": "import --replace",
    "queue_alerts": "undo withdraws the alerts of what it undoes itself",
    "withdraw_alerts": "undo's own (the alerts of what it undoes)",
    "claim_alert": "delivery",
    "mark_alert_delivered": "delivery",
    "mark_alert_dropped": "delivery",
    "mark_alert_failed": "delivery",
    "defer_alerts": "delivery",
    "requeue_failed_alerts": "delivery",
    "try_lease": "leases",
    "release_lease": "leases",
    "archive_before": "the archive itself",
    "restore_archived": "the archive itself (undo)",
    "mark_undone": "the archive itself (undo)",
    "purge_archive": "the archive itself (its age limit)",
    "forget_archived": "the archive itself (forget)",
    "restore_archive": "import",
    "start_session": "console sessions",
    "touch_session": "console sessions",
    "add_session_notice": "console sessions",
    "end_session": "console sessions",
    "remember_request": "chat requests already taken (replays)",
    "mark_ingest": "an ingest in flight announcing itself (reconcile's bookkeeping)",
    "ensure_schema": "schema",
    "close": "life cycle",
}


class Recording:
    """Wraps a graph store: the write methods archive before they write; everything else passes through."""

    def __init__(self, graph: GraphStore, change: ChangeRecord, team: str) -> None:
        self._graph = graph
        self._change = change
        self._team = team

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    @property
    def change(self) -> ChangeRecord:
        return self._change

    def _keep(self, refs: Sequence[ItemRef]) -> None:
        if refs:
            self._graph.archive_before(self._change, self._team, refs)

    # -- episodes ------------------------------------------------------------------------------------
    def update_episodes(self, updates: Sequence[EpisodeUpdate]) -> None:
        self._keep([ItemRef("Episode", u.id) for u in updates if u.changes()])
        self._graph.update_episodes(updates)

    def retire_episodes(self, retirements: Sequence[Retirement]) -> None:
        refs = [ItemRef("Episode", r.id, text=True) for r in retirements]
        self._keep(refs + [ItemRef("Tombstone", r.id) for r in retirements])
        self._graph.retire_episodes(retirements)

    def revive_episodes(self, texts: Mapping[str, str]) -> None:
        self._keep([ItemRef("Episode", i) for i in texts] + [ItemRef("Tombstone", i) for i in texts])
        self._graph.revive_episodes(texts)

    # -- patterns ------------------------------------------------------------------------------------
    def write_pattern(self, pattern: Pattern, subject_keys: Sequence[str], evidence: Sequence[EpisodeUpdate]) -> None:
        refs = [ItemRef("Pattern", pattern.id)] + [ItemRef("Entity", k) for k in subject_keys]
        self._keep(refs + [ItemRef("Episode", u.id) for u in evidence if u.changes()])
        self._graph.write_pattern(pattern, subject_keys, evidence)

    def update_patterns(self, updates: Sequence[PatternUpdate]) -> None:
        self._keep([ItemRef("Pattern", u.id) for u in updates])
        self._graph.update_patterns(updates)

    def merge_patterns(self, keep: Pattern, drop: Pattern, moved: Sequence[EpisodeUpdate], at: datetime) -> None:
        refs = [ItemRef("Pattern", keep.id), ItemRef("Pattern", drop.id), ItemRef("Tombstone", drop.id)]
        self._keep(refs + [ItemRef("Episode", u.id) for u in moved if u.changes()])
        self._graph.merge_patterns(keep, drop, moved, at)

    def link_patterns(self, a: str, b: str, relation: LinkRelation) -> None:
        self._keep([ItemRef("Pattern", a)])
        self._graph.link_patterns(a, b, relation)

    def link_unrelated(self, pairs: Sequence[tuple[str, str]], prompt_id: str) -> None:
        self._keep([ItemRef("Pattern", a) for a in dict.fromkeys(a for a, _ in pairs)])
        self._graph.link_unrelated(pairs, prompt_id)

    # -- contradictions ------------------------------------------------------------------------------
    def open_contradiction(self, c: Contradiction, counter: int, old_confidence: float) -> None:
        refs = [ItemRef("Contradiction", c.id), ItemRef("Pattern", c.old_pattern_id)]
        self._keep(refs + [ItemRef("Pattern", c.new_pattern_id)])
        self._graph.open_contradiction(c, counter, old_confidence)

    def resolve_supersede(self, contradiction: Contradiction, winner: Pattern, loser: Pattern) -> None:
        refs = [ItemRef("Contradiction", contradiction.id), ItemRef("Pattern", winner.id)]
        self._keep(refs + [ItemRef("Pattern", loser.id)])
        self._graph.resolve_supersede(contradiction, winner, loser)

    def resolve_keep_both(self, contradiction: Contradiction, a: PatternUpdate, b: PatternUpdate) -> None:
        refs = [ItemRef("Contradiction", contradiction.id), ItemRef("Pattern", a.id)]
        self._keep(refs + [ItemRef("Pattern", b.id)])
        self._graph.resolve_keep_both(contradiction, a, b)

    # -- meta ----------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        self._keep([ItemRef("Meta", key)])
        self._graph.set_meta(key, value)

    def finish_journal(self, key: str, value: str, journal: str) -> None:
        self._keep([ItemRef("Meta", key), ItemRef("Meta", journal)])
        self._graph.finish_journal(key, value, journal)

    def update_patterns_and_meta(self, updates: Sequence[PatternUpdate], key: str, value: str) -> None:
        self._keep([ItemRef("Pattern", u.id) for u in updates] + [ItemRef("Meta", key)])
        self._graph.update_patterns_and_meta(updates, key, value)


def recorded(graph: GraphStore, change: ChangeRecord, team: str) -> GraphStore:
    """``graph`` with every write of ``team``'s steps archived under ``change`` first."""
    return cast(GraphStore, Recording(graph, change, team))
