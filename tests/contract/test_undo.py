"""Undo and release on both backend pairs: what a night destroyed comes back, byte for byte.

A night that created patterns and retired messages, then ``undo`` of it: the graph and the vectors
equal a snapshot taken before that night (the archive's own nodes and the run ledger aside).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from taskzilla_sleep.core.errors import Conflict
from taskzilla_sleep.core.models import EpisodeStatus, PatternStatus
from taskzilla_sleep.memory import facts
from taskzilla_sleep.memory.admin import forget_episode
from taskzilla_sleep.memory.archive import UndoRefused, plan_undo, release_pattern, undo_run
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from tests.contract.test_cycle import NIGHT, TEAM, Stack

ARCHIVE_LABELS = frozenset({"Run", "Change", "Archived"})
NIGHT2 = NIGHT + timedelta(hours=73)  # past the 72 h grace: decay retires what night 1 absorbed

# Delivered after night 1 (as tests/crash_driver.py's late messages): night 2 distills a new belief.
LATE = [
    ("anna", "Release notes for every deploy go in #releases before the deploy starts."),
    ("joost", "Every deploy needs its release notes posted in #releases before it starts."),
    ("sara", "Please post the release notes of a deploy in #releases before you start it."),
    ("martin", "Before starting any deploy, post its release notes in #releases first."),
]


def _late(stack: Stack) -> None:
    """Four people's words over three days, the last after night 1, delivered after it: a belief of
    several people on several days, learned by night 2."""
    ts = NIGHT + timedelta(hours=20)
    lines = [
        json.dumps(
            {"team": TEAM, "channel": "ops", "author": a, "text": t, "provenance": "human"}
            | {"ts": (ts - timedelta(days=i % 3, minutes=i)).isoformat()}
        )
        for i, (a, t) in enumerate(LATE)
    ]
    stack.ingestor(NIGHT + timedelta(hours=21)).ingest_lines(lines, "late")


def snapshot(stack: Stack) -> dict[str, Any]:
    """Every node and relationship but the archive's and the ledger's, and every vector with its text,
    metadata and embedding (rounded to what float32 round-trips)."""
    vectors: dict[str, Any] = {}
    assert isinstance(stack.vectors, ChromaVectorStore)
    store = stack.vectors
    for team in store.teams():
        for kind in ("episodes", "patterns"):
            ids = sorted(store.present(team, kind))  # type: ignore[arg-type]
            embedded = store.embeddings(team, kind, ids)  # type: ignore[arg-type]
            col = store._collection(store._current(f"tz_{team}_{kind}"), create=False)
            got = col.get(ids=ids, include=["documents", "metadatas"]) if col is not None and ids else None
            rows = (
                dict(zip(got["ids"], zip(got["documents"] or [], got["metadatas"] or [], strict=True), strict=True))
                if got
                else {}
            )
            vectors[f"{team}/{kind}"] = {i: [*rows[i], [round(x, 5) for x in embedded[i]]] for i in ids}
    return {"graph": stack.graph.snapshot(skip_labels=ARCHIVE_LABELS), "vectors": vectors}


def _night(stack: Stack, at: Any) -> str:
    result = stack.night(at)
    assert result.ok, [s.error for s in result.run.steps]
    return result.run.id


def _undo(stack: Stack, run_id: str, **kw: Any) -> Any:
    return undo_run(stack.graph, stack.vectors, run_id, "cli:ops", "a false belief", NIGHT2 + timedelta(hours=5), **kw)


def test_a_night_then_its_undo_equals_the_snapshot_before_it(stack: Stack) -> None:
    stack.ingest_sample()
    facts.pin(stack.graph, stack.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin")
    night1 = _night(stack, NIGHT)
    _late(stack)
    before_night2 = snapshot(stack)

    night2 = _night(stack, NIGHT2)
    after = stack.graph.counts(TEAM)
    assert after.episodes.get("retired", 0) > 0  # night 2 retired what night 1 absorbed ...
    assert any("#releases" in p.statement for p in stack.graph.patterns(TEAM))  # ... and learned a belief
    archive = stack.graph.archive_counts(TEAM)
    assert archive.texts == after.episodes["retired"] and archive.bytes > 0

    report = _undo(stack, night2)
    assert report.undone == [night2] and report.texts == after.episodes["retired"] and report.removed > 0
    assert snapshot(stack) == before_night2
    assert stack.graph.get_run(night2).undone_by == "cli:ops"  # type: ignore[union-attr]

    # A repeat changes nothing.
    assert _undo(stack, night2).already
    assert snapshot(stack) == before_night2
    assert night1 != night2 and stack.graph.get_change(night1).undone_at is None  # type: ignore[union-attr]


def test_undoing_a_night_a_later_night_built_on_is_refused_unless_cascade(stack: Stack) -> None:
    stack.ingest_sample()
    before = snapshot(stack)
    night1 = _night(stack, NIGHT)
    night2 = _night(stack, NIGHT2)  # retires what night 1 absorbed: it wrote night 1's episodes
    with pytest.raises(UndoRefused) as refused:
        _undo(stack, night1)
    assert night2 in str(refused.value) and [c.id for c in refused.value.later] == [night2]
    assert stack.graph.get_change(night1).undone_at is None  # type: ignore[union-attr]
    assert [c.id for c in plan_undo(stack.graph, night1, cascade=True)] == [night2, night1]
    report = _undo(stack, night1, cascade=True)
    assert report.undone == [night2, night1]
    assert snapshot(stack) == before


def test_release_gives_a_wrong_beliefs_messages_back_with_their_text_and_vectors(stack: Stack) -> None:
    stack.ingest_sample()
    _night(stack, NIGHT)
    _night(stack, NIGHT2)
    retired = stack.graph.episodes_by_status(TEAM, [EpisodeStatus.RETIRED.value])
    owner = retired[0].absorbed_by
    assert owner is not None
    mine = [e.id for e in retired if e.absorbed_by == owner]
    assert all(e.text == "" for e in stack.graph.get_episodes(mine))

    report = release_pattern(
        stack.graph, stack.vectors, TEAM, owner, "cli:ops", "not a team rule", NIGHT2 + timedelta(hours=1)
    )
    assert sorted(report.revived) == sorted(mine) and not report.text_gone
    back = stack.graph.get_episodes(mine)
    assert all(e.status is EpisodeStatus.RAW and e.text and e.absorbed_by is None for e in back)
    assert stack.vectors.present(TEAM, "episodes", mine) == set(mine)
    assert not any(t.id in mine for t in stack.graph.tombstones(TEAM))
    (p,) = stack.graph.patterns_by_id([owner])
    assert (
        p.status is PatternStatus.RETIRED
        and p.archived_by == "cli:ops"
        and "not a team rule" in (p.archived_reason or "")
    )
    assert owner not in stack.vectors.present(TEAM, "patterns", [owner])
    # A repeat is harmless; releasing it again says so.
    assert release_pattern(
        stack.graph, stack.vectors, TEAM, owner, "cli:ops", "again", NIGHT2 + timedelta(hours=2)
    ).already


def test_the_archive_is_purged_after_archive_days_and_the_run_can_no_longer_be_undone(stack: Stack) -> None:
    stack.ingest_sample()
    night1 = _night(stack, NIGHT)
    assert stack.graph.archive_counts(TEAM).items > 0
    stack.settings = stack.settings.model_copy(
        update={"decay": stack.settings.decay.model_copy(update={"archive_days": 1.0})}
    )
    _night(stack, NIGHT + timedelta(days=2))
    assert stack.graph.get_change(night1).purged_at is not None  # type: ignore[union-attr]
    with pytest.raises(Conflict, match="purged"):
        _undo(stack, night1)


def test_forget_purges_the_archived_text_too(stack: Stack) -> None:
    stack.ingest_sample()
    _night(stack, NIGHT)
    _night(stack, NIGHT2)
    (victim, *_) = stack.graph.episodes_by_status(TEAM, [EpisodeStatus.RETIRED.value])
    assert victim.id in stack.graph.archived_texts([victim.id])
    forget_episode(stack.graph, stack.vectors, TEAM, victim.id, "cli:anna", "my data", NIGHT2, 0.8)
    assert stack.graph.archived_texts([victim.id]) == {}


def test_the_archive_travels_with_an_export_and_an_undo_works_after_the_import(stack: Stack) -> None:
    import io

    from taskzilla_sleep.memory.admin import export_team, import_team

    stack.ingest_sample()
    _night(stack, NIGHT)
    _late(stack)
    before_night2 = snapshot(stack)
    night2 = _night(stack, NIGHT2)
    held = stack.graph.archive_counts(TEAM)
    out = io.StringIO()
    counts = export_team(stack.graph, stack.vectors, TEAM, out)
    assert counts["archived"] == held.items and counts["change"] == held.changes
    report = import_team(stack.graph, stack.vectors, out.getvalue().split("\n"), "export.jsonl", replace=True)
    assert report.counts["archived"] == held.items
    assert stack.graph.archive_counts(TEAM) == held
    _undo(stack, night2)
    assert snapshot(stack) == before_night2
