"""Ctrl-C at every point of an import or a reconcile: the note says what was left, and doing what it
says gives the same memory as an uninterrupted run (in-memory stores; the e2e tier sends real signals)."""

from __future__ import annotations

import io

import pytest

from taskzilla_sleep.interfaces.cli_ops import import_interrupted_note, reconcile_interrupted_note
from taskzilla_sleep.memory.admin import export_team, import_team
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.progress import Progress
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from tests.unit.test_memory_admin import NOW, TEAM, stores

__all__ = ["stores"]  # the fixture, used by name


def export_of(graph: MemoryGraphStore, vectors: MemoryVectorStore) -> str:
    out = io.StringIO()
    export_team(graph, vectors, TEAM, out, now=NOW)
    return out.getvalue()


class Stop:
    """A progress callback that records on ``shown`` and raises KeyboardInterrupt at its ``at``-th call."""

    def __init__(self, shown: Progress, at: int) -> None:
        self.shown, self.at, self.calls = shown, at, 0

    def __call__(self, *where: object) -> None:
        if len(where) == 3:
            phase, done, total = where
            self.shown.update(int(str(done)), int(str(total)), phase=str(phase))
        else:
            done, total = where
            self.shown.update(int(str(done)), int(str(total)), phase="repair")
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt


def a_whole_import(lines: list[str]) -> tuple[int, MemoryVectorStore]:
    """How many progress calls an uninterrupted import makes, and the vectors it leaves."""
    count, vectors = Stop(Progress("import", "off"), at=0), MemoryVectorStore()
    import_team(MemoryGraphStore(), vectors, lines, progress=count)
    return count.calls, vectors


def test_an_import_stopped_anywhere_is_finished_by_what_the_note_says(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    lines = export_of(*stores).splitlines()
    whole, whole_vectors = a_whole_import(lines)
    assert whole >= 8  # graph: start, 1 episode batch, 3 patterns, end; vectors: start, 2 batches
    seen = set()
    for at in range(1, whole + 1):
        graph, vectors = MemoryGraphStore(), MemoryVectorStore()
        shown = Progress("import", "off")
        with pytest.raises(KeyboardInterrupt):
            import_team(graph, vectors, lines, progress=Stop(shown, at))
        note = import_interrupted_note(TEAM, shown, replace=False)
        seen.add(shown.phase)
        if shown.phase == "graph":
            assert note.startswith(f"interrupted: {shown.done} of {shown.total} items of team 'platform' written")
            assert "re-run it with --replace to finish" in note
            import_team(graph, vectors, lines, replace=True)
        else:
            assert shown.phase == "vectors", note
            assert f"{shown.done} of {shown.total} vectors written: `taskzilla-sleep reconcile` embeds the rest" in note
            reconcile(graph, vectors, repair=True, now=NOW)
        assert export_of(graph, vectors) == "\n".join(lines) + "\n", (at, note)
        for kind in ("episodes", "patterns"):
            assert vectors.present(TEAM, kind) == whole_vectors.present(TEAM, kind), (at, note)
    assert seen == {"graph", "vectors"}


def test_an_import_with_replace_stopped_while_deleting_is_finished_by_running_it_again(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    lines = export_of(*stores).splitlines()
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    import_team(graph, vectors, lines)
    shown = Progress("import", "off")
    with pytest.raises(KeyboardInterrupt):
        import_team(graph, vectors, lines, replace=True, progress=Stop(shown, at=2))  # the team is deleted
    assert graph.teams() == []
    note = import_interrupted_note(TEAM, shown, replace=True)
    assert note == (
        "interrupted while deleting team 'platform''s memory (--replace), before importing; re-run the same command "
        "to finish (it deletes the partial team first and imports the whole file)"
    )
    import_team(graph, vectors, lines, replace=True)
    assert export_of(graph, vectors) == "\n".join(lines) + "\n"
    assert import_interrupted_note(TEAM, Progress("import", "off"), replace=False) == (
        "interrupted before anything was written; re-run the same command"
    )


def test_a_reconcile_stopped_after_one_collection_is_finished_by_running_it_again(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    vectors.delete("other", "episodes", ["ep-other-9"])  # a missing vector in the first collection (teams sorted)
    vectors.delete(TEAM, "episodes", ["ep-platform-1"])  # and one in a later one
    before = reconcile(graph, vectors, repair=False).missing
    shown = Progress("reconcile", "off")
    with pytest.raises(KeyboardInterrupt):
        reconcile(graph, vectors, repair=True, now=NOW, progress=Stop(shown, at=2))  # 0 of 4, then 1 of 4
    assert reconcile_interrupted_note(shown, check=False) == (
        "reconcile interrupted: 1 of 4 team collections checked, 3 left (what was repaired stays repaired); "
        "re-run the same command to finish: it checks everything again and repairs what is left"
    )
    assert reconcile(graph, vectors, repair=False).missing == before - 1  # the first was repaired, no other
    assert reconcile(graph, vectors, repair=True).repaired == before - 1
    assert reconcile(graph, vectors, repair=False).drift == 0
    assert reconcile_interrupted_note(Progress("reconcile", "off"), check=True).startswith(
        "reconcile interrupted: 0 of ? team collections checked, all left; re-run"
    )
