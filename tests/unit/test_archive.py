"""The archive on the in-memory stores: every graph write of a change is archived or says why not;
an undo withdraws the chat alerts of the contradictions it takes back (the contract suites run the
store side on every backend: tests/contract/test_archive_store.py, test_undo.py)."""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta

from taskzilla_sleep.alerts.message import AlertMessage
from taskzilla_sleep.alerts.outbox import Outbox, withdrawn
from taskzilla_sleep.core.models import Contradiction, ContradictionKind, Pattern, PatternKind, PatternStatus
from taskzilla_sleep.core.settings import AlertChannel
from taskzilla_sleep.memory.archive import recorded, undo_run
from taskzilla_sleep.memory.archive.recording import UNRECORDED_WRITES, Recording
from taskzilla_sleep.memory.contradictions import resolve
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import ChangeRecord, GraphStore

NOW = datetime.fromisoformat("2026-11-28T03:15:00+01:00")
# Every GraphStore method that only reads (a new method must be listed here, recorded, or in
# recording.UNRECORDED_WRITES with the reason it is not).
READS = {
    "alerted_open_contradictions", "alerts", "archive_counts", "archive_records", "archived_items", "archived_texts",
    "contradictions", "given_up_episodes", "ingest_marks", "ingest_episodes",
    "count_alerts", "count_episodes", "count_new_raw", "counts", "describe", "entity_neighbours", "episode_cards",
    "episode_entities", "episode_records", "episodes_by_author", "episodes_by_status", "episodes_in_window",
    "evidence_episode_ids", "get_change", "get_contradiction", "get_episodes", "get_meta", "get_run", "has_team",
    "later_changes", "lease_state", "live_ids", "live_texts", "night_runs", "pattern_cards", "pattern_edges",
    "pattern_links", "patterns", "patterns_by_id", "patterns_in_dispute", "pending_raw_episodes", "ping", "runs",
    "slot_done", "slot_runs", "stale_raw_episodes", "stored_episodes", "take_poisoned", "teams", "tombstones",
    "oldest_alert_at", "team_counts", "replies", "stale_edits", "unflagged_episodes",
}  # fmt: skip


def test_every_write_of_the_graph_store_is_archived_first_or_says_why_not() -> None:
    methods = {n for n, _ in inspect.getmembers(GraphStore, inspect.isfunction) if not n.startswith("_")}
    recorded_here = {n for n in vars(Recording) if not n.startswith("_") and n != "change"}
    assert recorded_here <= methods and not recorded_here & set(UNRECORDED_WRITES)
    assert methods - READS - recorded_here - set(UNRECORDED_WRITES) == set()
    assert not READS & (recorded_here | set(UNRECORDED_WRITES))


def _belief(pid: str, statement: str) -> Pattern:
    at = NOW - timedelta(days=3)
    return Pattern(
        id=pid,
        team="platform",
        statement=statement,
        kind=PatternKind.PROCESS,
        status=PatternStatus.ACTIVE,
        confidence=0.85,
        first_seen=at,
        last_seen=at,
        created_at=at,
        updated_at=at,
        valid_from=at,
    )


def test_an_undo_withdraws_the_alerts_of_the_contradictions_it_takes_back() -> None:
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    for p in (_belief("p-old", "Deploys need one reviewer"), _belief("p-new", "Deploys need two reviewers")):
        graph.write_pattern(p, [], [])
    night = ChangeRecord(id="run-night", kind="run", at=NOW, recorded_at=NOW, seq=1, by="schedule")
    c = Contradiction(
        id="con-1", team="platform", old_pattern_id="p-old", new_pattern_id="p-new",
        kind=ContradictionKind.UPDATE, opened_at=NOW, reason="the count changed",
    )  # fmt: skip
    recorded(graph, night, "platform").open_contradiction(c, counter=1, old_confidence=0.6)
    channels = {ch: AlertChannel(kind="webhook", url_env="HOOK") for ch in ("sent", "queued")}
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(channels, NOW) == 2
    assert outbox.mark_delivered("con-1:sent", NOW, message_ref="msg-42")

    report = undo_run(graph, vectors, "run-night", "cli:ops", "it misread the chat", NOW + timedelta(hours=6))
    assert (report.alerts_withdrawn, report.notices) == (1, 1) and graph.contradictions("platform") == []
    by_key = {a.key: a for a in graph.alerts()}
    assert by_key["con-1:queued~undone:run-night"].status == "dropped"
    assert "undone by cli:ops" in (by_key["con-1:queued~undone:run-night"].dropped_reason or "")
    assert by_key["con-1:sent~undone:run-night"].status == "delivered"
    notice = by_key["con-1:sent~undone:run-night:notice"]
    msg = AlertMessage.model_validate_json(notice.payload_json)
    assert notice.status == "pending" and msg.reply_to == "msg-42" and msg.resolution == "withdrawn"
    assert "Nothing to decide" in msg.text and "it misread the chat" in msg.text
    assert all(withdrawn(a) for a in graph.alerts())
    assert [p.status for p in graph.patterns_by_id(["p-new", "p-old"])] == [PatternStatus.ACTIVE] * 2

    # The same contradiction opened again by a later night gets alerts of its own, answered on resolve.
    graph.open_contradiction(c, counter=1, old_confidence=0.6)
    assert outbox.sync_contradictions(channels, NOW + timedelta(days=1)) == 2
    assert outbox.mark_delivered("con-1:sent", NOW + timedelta(days=1), message_ref="msg-99")
    done = resolve(graph, vectors, "con-1", "new", "lena", None, NOW + timedelta(days=1), 0.8)
    (answer,) = [a for a in graph.alerts() if a.key == "con-1.resolution:sent"]  # queued by the resolve
    assert AlertMessage.model_validate_json(answer.payload_json).reply_to == "msg-99"
    assert outbox.answer_resolution(done, NOW + timedelta(days=1)) == 0  # a repeat queues nothing new


def test_the_one_public_resolve_archives_the_decision_as_a_change_of_its_own() -> None:
    """``contradictions.resolve`` is the whole resolution (there is no second, bare one to call by
    mistake): the decision's writes are recorded as a ``resolve`` change naming who decided."""
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    for p in (_belief("p-old", "Deploys need one reviewer"), _belief("p-new", "Deploys need two reviewers")):
        graph.write_pattern(p, [], [])
    c = Contradiction(id="con-1", team="platform", old_pattern_id="p-old", new_pattern_id="p-new", opened_at=NOW)
    graph.open_contradiction(c, counter=1, old_confidence=0.6)
    resolve(graph, vectors, "con-1", "both", "lena", "both hold", NOW + timedelta(hours=1), 0.8)
    changes, items = graph.archive_records("platform")
    (change,) = [x for x in changes if x.kind == "resolve"]
    assert change.by == "lena" and change.at == NOW + timedelta(hours=1)
    assert {i.change for i in items} == {change.id} and len(items) >= 2  # the images of what it wrote


def test_a_change_that_wrote_nothing_leaves_no_trace_and_a_graph_stays_a_graph() -> None:
    graph = MemoryGraphStore()
    change = ChangeRecord(id="run-idle", kind="run", at=NOW, recorded_at=NOW, seq=1, by="schedule")
    rec: GraphStore = recorded(graph, change, "platform")
    assert rec.patterns("platform") == [] and rec.get_meta("nothing") is None
    rec.update_episodes([])
    assert graph.get_change("run-idle") is None and graph.archive_counts().items == 0
