"""Inspect, forget, export and import on the in-memory stores (the contract tier runs the real ones)."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from taskzilla_sleep.core.errors import Conflict, InputError, NotFound
from taskzilla_sleep.core.models import (
    Contradiction,
    Episode,
    EpisodeIn,
    EpisodeStatus,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
    Run,
)
from taskzilla_sleep.memory import facts
from taskzilla_sleep.memory.admin import (
    export_team,
    forget_author,
    forget_episode,
    forget_pattern,
    import_team,
    list_patterns,
    show_pattern,
)
from taskzilla_sleep.memory.facts import fact_id
from taskzilla_sleep.memory.recall import recall
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


def export_lines(graph: MemoryGraphStore, vectors: MemoryVectorStore, team: str = TEAM) -> list[str]:
    out = io.StringIO()
    export_team(graph, vectors, team, out, now=NOW)
    return out.getvalue().splitlines()


def retrailed(lines: list[str]) -> list[str]:
    """``lines`` (a header and records, no trailer) with the trailer an exporter would write for them."""
    counts: dict[str, int] = {}
    for x in lines[1:]:
        kind = json.loads(x)["type"]
        counts[kind] = counts.get(kind, 0) + 1
    sha = hashlib.sha256("".join(x + "\n" for x in lines).encode()).hexdigest()
    return [*lines, json.dumps({"type": "trailer", "lines": len(lines), "counts": counts, "sha256": sha})]


def test_export_takes_its_own_team_jobs_only(stores: tuple[MemoryGraphStore, MemoryVectorStore]) -> None:
    graph, vectors = stores
    figures = {"episodes_total": 4000}  # a run over every team holds every team's sizes
    for rid, team in (("run_all", None), ("run_mine", TEAM), ("run_theirs", "other")):
        run = Run(
            id=rid, trigger="schedule", started_at=NOW, now=NOW, slot="2026-12-05", team=team, sizes_after=figures
        )
        graph.save_run(run)
    lines = export_lines(graph, vectors)
    runs = {json.loads(x)["id"] for x in lines if json.loads(x)["type"] == "run"}
    assert runs == {"run_mine"}
    target = MemoryGraphStore()
    import_team(target, MemoryVectorStore(), lines)
    assert [r.id for r in target.runs(100)] == ["run_mine"]


def test_export_ends_with_a_trailer_that_counts_and_checksums_the_lines_before_it(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    out = io.StringIO()
    counts = export_team(graph, vectors, TEAM, out, now=NOW)
    text = out.getvalue()
    body, last = text[: text.rstrip("\n").rindex("\n") + 1], text.splitlines()[-1]
    trailer = json.loads(last)
    assert trailer == {
        "type": "trailer",
        "lines": len(text.splitlines()) - 1,
        "counts": counts,
        "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
    }
    assert counts == {"episode": 6, "pattern": 3, "contradiction": 1}
    assert json.loads(text.splitlines()[0])["version"] == 2


def test_an_export_cut_at_any_line_is_refused_and_writes_nothing(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    lines = export_lines(*stores)
    for cut in range(1, len(lines)):
        target, target_v = MemoryGraphStore(), MemoryVectorStore()
        with pytest.raises(InputError) as info:
            import_team(target, target_v, lines[:cut], source="f.jsonl")
        assert str(info.value).startswith(f"f.jsonl: the file ends after line {cut} without its trailer: cut short?")
        assert target.teams() == [] and target_v.teams() == []
    with pytest.raises(InputError) as info:
        import_team(MemoryGraphStore(), MemoryVectorStore(), lines[:-2], source="f.jsonl")
    assert str(info.value) == (
        "f.jsonl: the file ends after line 10 without its trailer: cut short? (it has episode 6, pattern 3); "
        "nothing was imported (export the team again; --no-trailer imports what is there)"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ls: ls[1:], ":1: field type: the first line must be the header"),
        (lambda ls: [*ls[:-1], "{oops", ls[-1]], ":12: not JSON"),
        (lambda ls: [*ls[:-1], '{"type": "thing"}', ls[-1]], "field type: 'thing' is not one of"),
        (lambda ls: [*ls[:-1], ls[1], ls[-1]], "is already on line 2"),
        (lambda ls: [ls[0], ls[1].replace('"ts": "', '"ts": "x'), *ls[2:]], ":2: episode: field ts"),
        (lambda ls: [*ls, ls[1]], ":13: a line after the trailer \\(line 12\\), which must be the last"),
        (
            lambda ls: [*ls[:2], *ls[3:]],
            ":11: trailer: it counts 11 lines before it, the file has 10; it counts 6 episode lines, the file has 5;",
        ),
        (
            lambda ls: [ls[0], ls[1].replace("rebase", "merge"), *ls[2:]],
            ":12: trailer: the checksum of the lines before it differs: the file changed since the export;",
        ),
        (lambda ls: [*ls[:-1], ls[-1].replace('"sha256": "', '"sha256": "x')], ":12: trailer: field sha256"),
        # A line of another team, or naming another team's entity or meta key: never imported as this one.
        (
            lambda ls: [ls[0], ls[1].replace(f'"team": "{TEAM}"', '"team": "other"'), *ls[2:]],
            ":2: field team: 'other' is not the header's team 'platform'; nothing was imported",
        ),
        (
            lambda ls: [ls[0].replace(f'"team": "{TEAM}"', '"team": "renamed"'), *ls[1:]],
            ":2: field team: 'platform' is not the header's team 'renamed'; .* --as-team NEW",
        ),
        (
            lambda ls: retrailed(
                [*ls[:-1], json.dumps({"type": "meta", "key": "reflect_watermark:other", "value": "1"})]
            ),
            ":12: field key: 'reflect_watermark:other' is not a meta key of team 'platform'",
        ),
        (
            lambda ls: retrailed(
                [
                    ls[0],
                    ls[1].replace(
                        '"mentions": []',
                        '"mentions": [{"key": "other/person/sara", '
                        '"kind": "person", "name": "sara", "role": "author"}]',
                    ),
                    *ls[2:-1],
                ]
            ),
            ":2: entity 'other/person/sara' is not an entity of team 'platform'",
        ),
    ],
)
def test_a_bad_file_names_line_and_field_and_writes_nothing(
    stores: tuple[MemoryGraphStore, MemoryVectorStore], change: object, message: str
) -> None:
    graph, vectors = stores
    target = MemoryGraphStore()
    for trailer in (True, False):  # --no-trailer reads a file without one; a trailer that is there is checked
        with pytest.raises(InputError, match=message):
            import_team(target, MemoryVectorStore(), change(export_lines(graph, vectors)), "f.jsonl", trailer=trailer)  # type: ignore[operator]
    assert target.teams() == [] and target.runs(5) == []


def test_an_export_written_before_trailers_needs_no_trailer_and_warns(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    lines = export_lines(graph, vectors)[:-1]
    lines[0] = lines[0].replace('"version": 2', '"version": 1')
    every_team = Run(id="run_all", trigger="manual", started_at=NOW, now=NOW)  # older files have these
    lines.append(json.dumps({"type": "run", **every_team.model_dump(mode="json")}))
    target, target_v = MemoryGraphStore(), MemoryVectorStore()
    with pytest.raises(InputError) as info:
        import_team(target, target_v, lines, source="old.jsonl")
    assert str(info.value) == (
        "old.jsonl: no trailer: an export written before trailers (format version 1), so whether it is whole cannot "
        "be checked (it has contradiction 1, episode 6, pattern 3, run 1); nothing was imported (if it is whole: "
        "--no-trailer)"
    )
    assert target.teams() == []
    report = import_team(target, target_v, lines, source="old.jsonl", trailer=False)
    assert report.warnings == [
        "old.jsonl: no trailer: an export written before trailers (format version 1), so whether it is whole cannot "
        "be checked (it has contradiction 1, episode 6, pattern 3, run 1); imported without that check (--no-trailer)"
    ]
    assert report.counts["episode"] == 6 and [r.id for r in target.runs(5)] == ["run_all"]
    assert export_lines(target, target_v)[1:-1] == export_lines(graph, vectors)[1:-1]


def unchanged(graph: MemoryGraphStore, vectors: MemoryVectorStore) -> dict[str, object]:
    """Every team's memory as an export and vectors show it (the header's time left out)."""
    return {
        team: (export_lines(graph, vectors, team)[1:], {k: vectors.present(team, k) for k in ("episodes", "patterns")})
        for team in sorted(set(graph.teams()) | set(vectors.teams()))
    }


def test_a_renamed_export_never_takes_another_teams_memory(stores: tuple[MemoryGraphStore, MemoryVectorStore]) -> None:
    graph, vectors = stores
    lines = export_lines(graph, vectors)
    # Renamed with care: every team field and entity key, and a trailer written again to match.
    renamed = retrailed([x.replace(f'"{TEAM}"', '"renamed"').replace(f'"{TEAM}/', '"renamed/') for x in lines[:-1]])
    before = unchanged(graph, vectors)
    for replace in (False, True):
        with pytest.raises(Conflict) as info:
            import_team(graph, vectors, renamed, source="renamed.jsonl", replace=replace)
        assert str(info.value).startswith(
            "renamed.jsonl: the target stores hold 10 of this file's items under another team (episode "
            "'ep-platform-0' of team 'platform', episode 'ep-platform-1' of team 'platform', "
        )
        assert "and 5 more): importing them as team 'renamed' would take them from it; nothing was imported" in str(
            info.value
        )
        assert "--as-team NEW" in str(info.value)
        assert unchanged(graph, vectors) == before and "renamed" not in graph.teams()


def test_import_as_team_copies_a_team_in_its_own_stores_and_leaves_it_as_it_was(
    stores: tuple[MemoryGraphStore, MemoryVectorStore],
) -> None:
    graph, vectors = stores
    fact = facts.pin(graph, vectors, TEAM, "Lea is on call this week", "martin", NOW, "lea")
    said = EpisodeIn(team=TEAM, channel="dev", author="lea", text="paging goes to lea", ts=T0, provenance="human")
    derived = Episode.from_input(said, T0)  # no id given: derived from the team and the message
    graph.upsert_episodes([derived], [])
    vectors.upsert(TEAM, "episodes", [derived.id], [derived.text], [{}])
    forget_episode(graph, vectors, TEAM, f"ep-{TEAM}-0", "sara", "typo", NOW)
    source_recall = recall(graph, vectors, "rebase before merging", NOW, teams=[TEAM])  # marks what it read
    lines = export_lines(graph, vectors)
    before = unchanged(graph, vectors)

    report = import_team(graph, vectors, lines, source="f.jsonl", as_team="copy")
    assert (report.team, report.copied_from, report.replaced) == ("copy", TEAM, False)
    assert report.counts == {
        "episode": 7,
        "pattern": 3,
        "fact": 1,
        "link": 0,
        "contradiction": 1,
        "tombstone": 1,
        "run": 0,
        "meta": 0,
        "alert": 0,
        "change": 0,
        "archived": 0,
    }
    assert unchanged(graph, vectors) | {"copy": None} == before | {"copy": None}  # the source, vectors included
    assert recall(graph, vectors, "rebase before merging", NOW, teams=[TEAM]) == source_recall
    copy = export_lines(graph, vectors, "copy")[1:-1]
    source = export_lines(graph, vectors)[1:-1]
    assert len(copy) == len(source) and not {json.loads(x).get("id") for x in copy} & {
        json.loads(x).get("id") for x in source
    }
    assert all(json.loads(x)["team"] == "copy" for x in copy)
    # The ids the new team's own work would give, where content derives them.
    ids = {e.id for e in graph.episodes_by_status("copy", [s.value for s in EpisodeStatus])}
    assert Episode.from_input(said.model_copy(update={"team": "copy"}), T0).id in ids
    assert fact_id("copy", fact.statement) in {p.id for p in graph.patterns("copy")}
    assert facts.pin(graph, vectors, "copy", fact.statement, "martin", NOW, "lea").id == fact_id("copy", fact.statement)
    # Every reference followed: evidence, absorption, the contradiction's beliefs, the tombstone.
    pats = {p.statement: p for p in graph.patterns("copy")}
    a = pats["the team rebases before merging (pat-a)"]
    assert set(a.evidence_ids) <= ids and a.id not in {"pat-a"}
    absorbed = [e for e in graph.get_episodes(sorted(ids)) if e.absorbed_by]
    assert absorbed and {e.absorbed_by for e in absorbed} == {a.id}
    (c,) = graph.contradictions("copy")
    assert {c.old_pattern_id, c.new_pattern_id} <= {p.id for p in pats.values()}
    (stone,) = graph.tombstones("copy")
    assert stone.id not in {t.id for t in graph.tombstones(TEAM)} and stone.by == "sara"
    assert vectors.present("copy", "episodes") == {e.id for e in graph.get_episodes(sorted(ids)) if e.text}
    hits = recall(graph, vectors, "rebase before merging", NOW, teams=["copy"])
    assert hits and {h.team for h in hits} == {"copy"}
    # Copied again: the team is taken (Conflict); with replace, the same ids again (derived, not random).
    with pytest.raises(Conflict, match="team 'copy' already has memory"):
        import_team(graph, vectors, lines, as_team="copy")
    assert import_team(graph, vectors, lines, as_team="copy", replace=True).replaced
    assert export_lines(graph, vectors, "copy")[1:-1] == copy and unchanged(graph, vectors) | {
        "copy": None
    } == before | {"copy": None}
