"""Inspect, forget, export and import on the in-memory stores (the contract tier runs the real ones)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from taskzilla_sleep.errors import Conflict, InputError, NotFound
from taskzilla_sleep.memory_admin import (
    export_team,
    forget_author,
    forget_episode,
    forget_pattern,
    import_team,
    list_patterns,
    show_pattern,
)
from taskzilla_sleep.models import (
    Contradiction,
    Episode,
    EpisodeStatus,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
    Run,
)
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import EpisodeUpdate

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=5)
TEAM = "platform"


def ep(i: int, author: str, team: str = TEAM) -> Episode:
    return Episode(
        id=f"ep-{team}-{i}",
        team=team,
        channel="dev",
        author=author,
        text=f"we always rebase before merging, says {author} ({i})",
        ts=T0 + timedelta(minutes=i),
        provenance=Provenance.HUMAN,
        ingested_at=T0,
    )


def belief(pid: str, evidence: list[str], **over: object) -> Pattern:
    base: dict[str, object] = {
        "id": pid,
        "team": TEAM,
        "statement": f"the team rebases before merging ({pid})",
        "kind": PatternKind.NORM,
        "status": PatternStatus.ACTIVE,
        "confidence": 0.85,
        "evidence_ids": evidence,
        "support_count": len(evidence),
        "distinct_authors": 2,
        "distinct_channels": 1,
        "first_seen": T0,
        "last_seen": T0,
        "created_at": T0,
        "updated_at": T0,
        "valid_from": T0,
    }
    base.update(over)
    return Pattern.model_validate(base)


@pytest.fixture
def stores() -> tuple[MemoryGraphStore, MemoryVectorStore]:
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    eps = [ep(i, "sara" if i < 3 else "tom") for i in range(6)] + [ep(9, "sara", team="other")]
    graph.upsert_episodes(eps, [])
    for team in (TEAM, "other"):
        mine = [e for e in eps if e.team == team]
        vectors.upsert(team, "episodes", [e.id for e in mine], [e.text for e in mine], [{}] * len(mine))
    ids = [e.id for e in eps[:6]]
    absorb = [
        EpisodeUpdate(id=i, status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=T0, absorbed_by="pat-a")
        for i in ids[3:6]
    ]
    graph.write_pattern(belief("pat-a", ids[:6]), [], [EpisodeUpdate(id=i) for i in ids[:3]] + absorb)
    graph.write_pattern(belief("pat-b", ids[:2], status=PatternStatus.TENTATIVE, confidence=0.6), [], [])
    for pid in ("pat-a", "pat-b"):
        vectors.upsert(TEAM, "patterns", [pid], [f"belief {pid}"], [{}])
    graph.write_pattern(belief("pat-c", ids[3:5], status=PatternStatus.CONTESTED), [], [])
    c = Contradiction(id="con-1", team=TEAM, old_pattern_id="pat-c", new_pattern_id="pat-b", opened_at=T0)
    graph.open_contradiction(c, counter=0, old_confidence=0.85)
    return graph, vectors


def test_forget_author_drops_their_text_and_vectors_and_rescores(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    report = forget_author(graph, vectors, TEAM, "SARA", "sara", "delete my data", NOW)
    assert report.episodes_forgotten == [f"ep-{TEAM}-{i}" for i in range(3)]
    for e in graph.get_episodes(report.episodes_forgotten):
        assert (e.status, e.text) == (EpisodeStatus.FORGOTTEN, "")
    assert vectors.present(TEAM, "episodes") == {f"ep-{TEAM}-{i}" for i in range(3, 6)}
    assert vectors.present("other", "episodes") == {"ep-other-9"}  # another team is never touched
    a, b = graph.patterns_by_id(["pat-a", "pat-b"])
    assert a.evidence_ids == [f"ep-{TEAM}-{i}" for i in range(3, 6)] and a.support_count == 3
    assert a.status is PatternStatus.TENTATIVE  # 3 messages of one person: below the floor
    assert [e.status for e in graph.get_episodes(a.evidence_ids)] == [EpisodeStatus.RAW] * 3  # given back
    assert sorted(report.episodes_returned) == a.evidence_ids
    assert (b.status, b.archived_by) == (PatternStatus.RETIRED, "sara")  # nothing supports it any more
    assert report.patterns_retired == ["pat-b"] and report.contradictions_closed == ["con-1"]
    assert graph.patterns_by_id(["pat-c"])[0].status is PatternStatus.ACTIVE  # back from contested
    assert vectors.present(TEAM, "patterns") == {"pat-a"}
    stones = {t.id: t for t in graph.tombstones(TEAM)}
    assert {stones[i].by for i in report.episodes_forgotten} == {"sara"}
    assert "rebase" not in json.dumps([t.model_dump(mode="json") for t in stones.values()])
    again = forget_author(graph, vectors, TEAM, "sara", "sara", "delete my data", NOW)  # a rerun converges
    assert again.episodes_forgotten == [] and again.patterns_rescored == []
    assert len(again.episodes_already_forgotten) == 3


def test_a_crash_between_the_stores_then_a_rerun_converges(
    stores: tuple[MemoryGraphStore, MemoryVectorStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, vectors = stores

    def down(*_args: object) -> None:
        raise RuntimeError("chroma went away")

    monkeypatch.setattr(vectors, "delete", down)
    with pytest.raises(RuntimeError):
        forget_episode(graph, vectors, TEAM, f"ep-{TEAM}-0", "sara", "typo with a secret", NOW)
    assert f"ep-{TEAM}-0" in vectors.present(TEAM, "episodes")
    monkeypatch.undo()
    forget_episode(graph, vectors, TEAM, f"ep-{TEAM}-0", "sara", "typo with a secret", NOW)
    assert f"ep-{TEAM}-0" not in vectors.present(TEAM, "episodes")
    assert f"ep-{TEAM}-0" not in graph.patterns_by_id(["pat-a"])[0].evidence_ids


def test_forget_pattern_gives_back_its_episodes_and_closes_its_contradictions(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    report = forget_pattern(graph, vectors, TEAM, "pat-a", "martin", "wrong", NOW)
    assert graph.patterns_by_id(["pat-a"]) == []
    assert sorted(report.episodes_returned) == [f"ep-{TEAM}-{i}" for i in range(3, 6)]
    assert all(e.status is EpisodeStatus.RAW for e in graph.get_episodes(report.episodes_returned))
    assert set(report.episodes_returned) <= vectors.present(TEAM, "episodes")
    assert "pat-a" not in vectors.present(TEAM, "patterns")
    forget_pattern(graph, vectors, TEAM, "pat-c", "martin", "wrong", NOW)
    c = graph.get_contradiction("con-1")
    assert (c.status.value, c.resolved_by) == ("resolved", "martin")
    assert graph.patterns_by_id(["pat-b"])[0].status is PatternStatus.TENTATIVE
    assert forget_pattern(graph, vectors, TEAM, "pat-a", "martin", "wrong", NOW).patterns_forgotten == ["pat-a"]
    with pytest.raises(NotFound):
        forget_pattern(graph, vectors, "other", "pat-b", "martin", "wrong", NOW)


def test_bad_requests_write_nothing(stores: tuple[MemoryGraphStore, MemoryVectorStore]) -> None:
    graph, vectors = stores
    before = graph.counts()
    with pytest.raises(NotFound):
        forget_episode(graph, vectors, "other", f"ep-{TEAM}-0", "sara", "why", NOW)
    with pytest.raises(NotFound):
        forget_author(graph, vectors, TEAM, "nobody", "sara", "why", NOW)
    with pytest.raises(InputError, match="--reason"):
        forget_author(graph, vectors, TEAM, "sara", "sara", " ", NOW)
    assert graph.counts() == before


def test_inspect_lists_and_shows_a_pattern_of_its_team_only(stores: tuple[MemoryGraphStore, MemoryVectorStore]) -> None:
    graph, _ = stores
    assert [p.id for p in list_patterns(graph, TEAM)] == ["pat-a", "pat-b", "pat-c"]
    assert [p.id for p in list_patterns(graph, TEAM, PatternStatus.CONTESTED)] == ["pat-b", "pat-c"]
    assert [p.id for p in list_patterns(graph, TEAM, limit=1, offset=1)] == ["pat-b"]
    detail = show_pattern(graph, TEAM, "pat-c")
    assert [e.id for e in detail.evidence] == [f"ep-{TEAM}-3", f"ep-{TEAM}-4"]
    assert [c.id for c in detail.contradictions] == ["con-1"]
    with pytest.raises(NotFound):
        show_pattern(graph, "other", "pat-c")
    with pytest.raises(InputError):
        list_patterns(graph, TEAM, limit=0)


def test_export_then_import_elsewhere_is_the_same_memory(stores: tuple[MemoryGraphStore, MemoryVectorStore]) -> None:
    graph, vectors = stores
    forget_author(graph, vectors, TEAM, "sara", "sara", "delete my data", NOW)
    out = io.StringIO()
    counts = export_team(graph, vectors, TEAM, out, now=NOW)
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["format"] == "taskzilla-export" and counts["episode"] == 6
    target_g, target_v = MemoryGraphStore(), MemoryVectorStore()
    report = import_team(target_g, target_v, lines)
    assert report.vectors == {"episodes": 3, "patterns": 2}
    again = io.StringIO()
    export_team(target_g, target_v, TEAM, again, now=NOW)
    assert again.getvalue() == out.getvalue()
    assert target_v.present(TEAM, "episodes") == vectors.present(TEAM, "episodes")
    with pytest.raises(Conflict):
        import_team(target_g, target_v, lines)
    assert import_team(target_g, target_v, lines, replace=True).replaced


def test_export_takes_whole_memory_runs_and_its_own_team_jobs_not_another_teams(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    for rid, team in (("run_all", None), ("run_mine", TEAM), ("run_theirs", "other")):
        graph.save_run(Run(id=rid, trigger="schedule", started_at=NOW, now=NOW, slot="2026-12-05", team=team))
    out = io.StringIO()
    export_team(graph, vectors, TEAM, out, now=NOW)
    lines = out.getvalue().splitlines()
    runs = {json.loads(x)["id"] for x in lines if json.loads(x)["type"] == "run"}
    assert {"run_all", "run_mine"} <= runs and "run_theirs" not in runs
    target = MemoryGraphStore()
    import_team(target, MemoryVectorStore(), lines)  # a run of every team (team null) is accepted
    assert {"run_all", "run_mine"} <= {r.id for r in target.runs(100)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ls: ls[1:], ":1: field type: the first line must be the header"),
        (lambda ls: [*ls, "{oops"], "not JSON"),
        (lambda ls: [*ls, '{"type": "thing"}'], "field type: 'thing' is not one of"),
        (lambda ls: [*ls, ls[1]], "is already on line 2"),
        (lambda ls: [ls[0], ls[1].replace('"ts": "', '"ts": "x')], ":2: episode: field ts"),
        (lambda ls: [ls[0], ls[1].replace(f'"team": "{TEAM}"', '"team": "other"')], ":2: field team"),
    ],
)
def test_a_bad_file_names_line_and_field_and_writes_nothing(
    stores: tuple[MemoryGraphStore, MemoryVectorStore], change: object, message: str
) -> None:
    graph, vectors = stores
    out = io.StringIO()
    export_team(graph, vectors, TEAM, out, now=NOW)
    target = MemoryGraphStore()
    with pytest.raises(InputError, match=message):
        import_team(target, MemoryVectorStore(), change(out.getvalue().splitlines()), source="f.jsonl")  # type: ignore[operator]
    assert target.teams() == [] and target.runs(5) == []
