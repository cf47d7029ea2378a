"""Edited messages and threads, on every backend: the graph store's ports (the in-memory fake, FalkorDB,
Neo4j) and the whole ingest path on both backend pairs (FalkorDB + embedded Chroma, Neo4j + Chroma
server): an edit replaces the text and the vector, takes the message out of the evidence and the
absorption of the beliefs it fed, and a crash mid-edit followed by a rerun leaves what one
uninterrupted run leaves."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest

from taskzilla_sleep.core.models import Episode, EpisodeStatus, PatternStatus, to_ms
from taskzilla_sleep.memory import edits as edits_module
from taskzilla_sleep.memory import ingest as ingest_module
from taskzilla_sleep.memory import reconcile as reconcile_module
from taskzilla_sleep.memory.admin import export_team, import_team
from taskzilla_sleep.memory.ingest import EpisodeFileError
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.rules.beliefs import LINT_VERSION, flagged
from taskzilla_sleep.stores.ports import EpisodeEdit, EpisodeUpdate, GraphStore
from tests.contract.test_cycle import Stack
from tests.contract.test_graph_store import T0, ep, links, pat

TEAM = "platform"


def edit(e: Episode, text: str, minutes: int, team: str = TEAM) -> EpisodeEdit:
    """An edit of ``e`` made ``minutes`` after T0, with the links its text gives."""
    at = T0 + timedelta(minutes=minutes)
    after = e.model_copy(update={"text": text, "edited_at": at})
    flag = (flagged(text), LINT_VERSION)
    return EpisodeEdit(e.id, team, text, at, after.content_hash(), tuple(links([after])), *flag)


# -- the graph store's ports ------------------------------------------------------------------------


def test_an_edit_replaces_the_text_and_the_message_is_judged_afresh(graph_store: GraphStore) -> None:
    first = ep(
        1,
        text="deploys need a review from @sara",
        status=EpisodeStatus.ABSORBED,
        absorbed_by="pat-1",
        absorbed_at=T0,
        schema_absorbed=1,
        distilled_at=T0,
        distill_attempts=2,
        distill_night="2026-11-30",
        declined_size=3,
        pinned=True,  # a kept property between the cleared ones (FalkorDB#1787)
        last_accessed=T0 + timedelta(hours=2),
    )
    graph_store.upsert_episodes([first], links([first]))
    graph_store.write_pattern(pat("pat-1", evidence_ids=[first.id], support_count=1), [], [EpisodeUpdate(id=first.id)])

    changed = graph_store.edit_episodes([edit(first, "deploys need a review from @tom", 30)])

    assert changed == [first.id]
    (got,) = graph_store.get_episodes([first.id])
    assert got.text == "deploys need a review from @tom"
    assert got.edited_at == T0 + timedelta(minutes=30)
    assert (got.status, got.absorbed_by, got.absorbed_at, got.schema_absorbed) == (EpisodeStatus.RAW, None, None, 0)
    assert (got.distilled_at, got.distill_attempts, got.distill_night, got.declined_size) == (None, 0, None, 0)
    assert got.pinned and got.last_accessed == T0 + timedelta(hours=2)  # what the edit does not touch stays
    stored = graph_store.stored_episodes([first.id])[first.id]
    assert stored.edit_pending and stored.edited_at_ms == to_ms(T0 + timedelta(minutes=30))
    assert stored.content_hash == got.content_hash()
    # No longer any pattern's evidence; its mentions are the new text's.
    assert first.id not in graph_store.pattern_edges(TEAM).get("pat-1", _NoEdges()).evidence
    names = {m.name for m in graph_store.episode_entities([first.id])[first.id]}
    assert "tom" in names and "sara" not in names
    assert graph_store.live_texts(TEAM, "episode", [first.id]) == {first.id: "deploys need a review from @tom"}

    graph_store.update_episodes([EpisodeUpdate(id=first.id, edit_pending=None)])
    assert not graph_store.stored_episodes([first.id])[first.id].edit_pending


class _NoEdges:
    evidence: tuple[str, ...] = ()


def test_an_edit_as_old_or_older_than_the_stored_one_changes_nothing(graph_store: GraphStore) -> None:
    first = ep(1, text="standup at 9")
    graph_store.upsert_episodes([first], [])
    assert graph_store.edit_episodes([edit(first, "standup at 10", 20)]) == [first.id]

    assert graph_store.edit_episodes([edit(first, "standup at 11", 20), edit(first, "standup at 8", 5)]) == []

    (got,) = graph_store.get_episodes([first.id])
    assert (got.text, got.edited_at) == ("standup at 10", T0 + timedelta(minutes=20))


def test_an_edit_never_reaches_another_team_nor_a_message_whose_text_is_gone(graph_store: GraphStore) -> None:
    mine, gone = ep(1, text="mine"), ep(2, text="retired one")
    graph_store.upsert_episodes([mine, gone], [])
    graph_store.retire_episodes([_retirement(gone.id)])

    changed = graph_store.edit_episodes(
        [edit(mine, "taken over", 10, team="other"), edit(gone, "back again", 10), edit(ep(9), "x", 10)]
    )

    assert changed == []
    texts = {e.id: e.text for e in graph_store.get_episodes([mine.id, gone.id])}
    assert texts == {mine.id: "mine", gone.id: ""}


def _retirement(eid: str) -> Any:
    from taskzilla_sleep.stores.ports import Retirement

    return Retirement(eid, EpisodeStatus.RETIRED, T0 + timedelta(days=1), "absorbed and decayed", "pat-1")


def test_replies_are_linked_whichever_arrives_first_and_never_across_teams(graph_store: GraphStore) -> None:
    question = ep(1, text="do we deploy on Fridays?", thread_id="ep-platform-1")
    early = ep(2, text="no, never on Fridays", reply_to=question.id, thread_id=question.id)
    late = ep(3, text="agreed", reply_to=question.id, thread_id=question.id)
    stranger = ep(1, team="other", text="not yours", reply_to=question.id)

    graph_store.upsert_episodes([early, stranger], [])  # the reply before the message it answers
    graph_store.link_replies([early.id, stranger.id])
    assert graph_store.replies(TEAM) == []
    graph_store.upsert_episodes([question], [])
    graph_store.link_replies([question.id])
    graph_store.upsert_episodes([late], [])
    graph_store.link_replies([late.id])
    graph_store.link_replies([question.id, early.id, late.id])  # idempotent

    assert graph_store.replies(TEAM) == [(early.id, question.id), (late.id, question.id)]
    assert graph_store.replies("other") == []
    relationships = graph_store.counts().relationships
    graph_store.link_replies([question.id, early.id, late.id, stranger.id])
    assert graph_store.counts().relationships == relationships
    (got,) = graph_store.get_episodes([early.id])
    assert (got.reply_to, got.thread_id) == (question.id, question.id)
    records = {r.episode.id: r.episode for r in graph_store.episode_records(TEAM)}
    assert records[late.id].reply_to == question.id and records[question.id].thread_id == question.id


# -- the ingest path on both backend pairs ----------------------------------------------------------

NOW = T0 + timedelta(days=1)


def _line(i: int, text: str, **over: object) -> str:
    row: dict[str, object] = {
        "id": f"slack-{i}",
        "team": TEAM,
        "channel": "deploys",
        "author": ["sara", "tom", "ana"][i % 3],
        "text": text,
        "ts": (T0 + timedelta(minutes=i)).isoformat(),
        "provenance": "human",
    }
    row.update(over)
    return json.dumps(row)


FIRST = [
    _line(1, "no deploys to production on Fridays"),
    _line(2, "reminder: we never deploy on Fridays"),
    _line(3, "Friday deploys are off limits for everyone"),
    _line(4, "do we deploy on Fridays?", thread_id="slack-4"),
]
EDIT = _line(2, "lunch is at noon today, see you there", edited_at=(T0 + timedelta(hours=3)).isoformat())


def _believe(stack: Stack) -> None:
    """The state a night leaves: an active belief that absorbed the three statements."""
    ids = ["slack-1", "slack-2", "slack-3"]
    belief = pat(
        "pat-friday",
        statement="The team does not deploy to production on Fridays.",
        status=PatternStatus.ACTIVE,
        confidence=0.9,
        evidence_ids=ids,
        support_count=3,
        distinct_authors=3,
        distinct_channels=1,
    )
    absorbed = [
        EpisodeUpdate(id=i, status=EpisodeStatus.ABSORBED, absorbed_by=belief.id, absorbed_at=T0, distilled_at=T0)
        for i in ids
    ]
    stack.graph.write_pattern(belief, [], absorbed)


def _state(stack: Stack) -> dict[str, Any]:
    vectors = stack.vectors.embeddings(TEAM, "episodes", [f"slack-{i}" for i in range(1, 6)])
    return {
        "graph": stack.graph.snapshot(skip_labels=frozenset({"Run", "Change", "Archived"})),
        "vectors": {k: [round(x, 5) for x in v] for k, v in sorted(vectors.items())},
    }


def test_an_edit_replaces_text_and_vector_and_leaves_the_belief_it_no_longer_states(stack: Stack) -> None:
    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    _believe(stack)

    report = stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")

    assert (report.new, report.edited, report.edited_ids) == (0, 1, ["slack-2"])
    (got,) = stack.graph.get_episodes(["slack-2"])
    assert (got.text, got.status, got.absorbed_by) == ("lunch is at noon today, see you there", "raw", None)
    assert got.edited_at == T0 + timedelta(hours=3)
    # The vector is the new text's: recall finds it by what it says now.
    (vec,) = stack.vectors.embeddings(TEAM, "episodes", ["slack-2"]).values()
    (want,) = stack.embedder.embed(["lunch is at noon today, see you there"])
    assert sum(a * b for a, b in zip(vec, want, strict=True)) > 0.999
    assert stack.vectors.query(TEAM, "episodes", "where is lunch today", 1, payload=False)[0].id == "slack-2"
    # The belief no longer counts it as evidence.
    (belief,) = stack.graph.patterns_by_id(["pat-friday"])
    assert belief.evidence_ids == ["slack-1", "slack-3"] and belief.support_count == 2
    assert "slack-2" not in stack.graph.pattern_edges(TEAM)["pat-friday"].evidence
    assert not stack.graph.stored_episodes(["slack-2"])["slack-2"].edit_pending
    # It is distilled again the next night, as a message that just arrived.
    assert "slack-2" in {e.id for e in stack.graph.pending_raw_episodes(TEAM, NOW, None)}

    again = stack.ingestor(NOW).ingest_lines([EDIT, FIRST[1]], "replay.jsonl")  # the edit and the original again
    assert (again.new, again.edited, again.present) == (0, 0, 1)
    assert stack.graph.get_episodes(["slack-2"])[0].text == "lunch is at noon today, see you there"


def test_a_reply_is_linked_and_the_same_id_with_other_text_stays_an_error(stack: Stack) -> None:
    reply = _line(5, "no, never on Fridays", reply_to="slack-4", thread_id="slack-4")
    stack.ingestor(NOW).ingest_lines([reply], "reply.jsonl")  # before the question it answers
    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    assert stack.graph.replies(TEAM) == [("slack-5", "slack-4")]

    with pytest.raises(EpisodeFileError) as info:
        stack.ingestor(NOW).ingest_lines([_line(1, "yes deploys on Fridays are fine")], "clash.jsonl")
    assert info.value.errors[0].field == "id" and "already stored with other content" in info.value.errors[0].reason
    with pytest.raises(EpisodeFileError) as other:
        stack.ingestor(NOW).ingest_lines(
            [_line(1, "theirs", team="billing", edited_at=(T0 + timedelta(hours=5)).isoformat())], "other.jsonl"
        )
    reason = other.value.errors[0].reason
    assert "already used by another message" in reason and "Fridays" not in reason and "deploys" not in reason


@pytest.mark.parametrize("point", ["ingest.after_edit", "ingest.after_edit_rescore"])
def test_a_crash_mid_edit_then_a_rerun_leaves_what_an_uninterrupted_run_leaves(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    _believe(stack)
    stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")
    expected = _state(stack)
    stack.graph.delete_all()
    stack.vectors.delete_all()

    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    _believe(stack)

    class Crash(BaseException):
        pass

    def crash(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(ingest_module, "crashpoint", crash)
    monkeypatch.setattr(edits_module, "crashpoint", crash)
    with pytest.raises(Crash):
        stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")
    monkeypatch.undo()
    assert stack.graph.stored_episodes(["slack-2"])["slack-2"].edit_pending  # the outbox holds the rest

    rerun = stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")

    assert rerun.edited_ids == ["slack-2"]
    assert _state(stack) == expected


def test_reconcile_finishes_an_edit_its_killed_ingest_left_pending(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    _believe(stack)
    stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")
    expected = _state(stack)
    stack.graph.delete_all()
    stack.vectors.delete_all()
    stack.ingestor(NOW).ingest_lines(FIRST, "first.jsonl")
    _believe(stack)

    def crash(name: str) -> None:
        if name == "ingest.after_edit":
            raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module, "crashpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        stack.ingestor(NOW).ingest_lines([EDIT], "edit.jsonl")
    monkeypatch.undo()

    young = reconcile(stack.graph, stack.vectors, repair=True, now=NOW)  # its writer may still be at work
    assert young.stale_edits == 0 and stack.graph.stored_episodes(["slack-2"])["slack-2"].edit_pending
    assert stack.graph.stale_edits(0.0) == {TEAM: ["slack-2"]}
    monkeypatch.setattr(reconcile_module, "EDIT_STALE_AFTER_S", 0.0)  # ten minutes later
    check = reconcile(stack.graph, stack.vectors, repair=False, now=NOW)
    assert check.stale_edits == 1 and stack.graph.stored_episodes(["slack-2"])["slack-2"].edit_pending

    done = reconcile(stack.graph, stack.vectors, repair=True, now=NOW)

    assert done.stale_edits == 1 and stack.graph.stale_edits(0.0) == {}
    assert _state(stack) == expected


def test_threads_and_edits_survive_export_and_import(stack: Stack) -> None:
    reply = _line(5, "no, never on Fridays", reply_to="slack-4", thread_id="slack-4")
    stack.ingestor(NOW).ingest_lines([*FIRST, reply, EDIT], "week.jsonl")

    def held(team: str) -> dict[str, tuple[object, ...]]:
        eps = stack.graph.episodes_by_status(team, ["raw", "absorbed"])
        return {e.text: (e.reply_to is not None, e.thread_id is not None, e.edited_at) for e in eps}

    before = held(TEAM)
    out = io.StringIO()
    export_team(stack.graph, stack.vectors, TEAM, out)
    lines = out.getvalue().splitlines()
    exported = {e["id"]: e for e in map(json.loads, lines) if e.get("type") == "episode"}
    assert exported["slack-2"]["edited_at"] == "2026-11-30T12:00:00Z" and exported["slack-5"]["reply_to"] == "slack-4"

    import_team(stack.graph, stack.vectors, lines, source="week-export.jsonl", replace=True)
    assert held(TEAM) == before and stack.graph.replies(TEAM) == [("slack-5", "slack-4")]
    again = stack.ingestor(NOW).ingest_lines([EDIT, reply], "replay.jsonl")  # re-deliveries after the import
    assert (again.new, again.edited, again.present) == (0, 0, 2)

    import_team(stack.graph, stack.vectors, lines, source="week-export.jsonl", as_team="platform-copy")
    assert held("platform-copy") == before
    ((copied_reply, copied_question),) = stack.graph.replies("platform-copy")
    (q,) = stack.graph.get_episodes([copied_question])
    (r,) = stack.graph.get_episodes([copied_reply])
    assert (q.team, q.text, r.reply_to, r.thread_id) == ("platform-copy", "do we deploy on Fridays?", q.id, q.id)
