"""The archive's part of the graph store, on every backend (the fake, FalkorDB, Neo4j): before-images,
restores, the age limit, forgetting, and the few writes undo and release add (``archive_port.py``)."""

from __future__ import annotations

from datetime import timedelta

from taskzilla_sleep.core.models import EpisodeStatus, PatternStatus
from taskzilla_sleep.stores.ports import (
    ChangeRecord,
    EpisodeUpdate,
    GraphStore,
    ItemRef,
    PatternUpdate,
    Retirement,
)
from tests.contract.test_graph_store import T0, alert, contra, ep, links, pat, run

TEAM = "platform"


def change(cid: str, seq: int, at_days: float = 0.0) -> ChangeRecord:
    at = T0 + timedelta(days=at_days)
    return ChangeRecord(id=cid, kind="run", at=at, recorded_at=at, seq=seq, by="schedule")


def test_the_first_image_of_an_item_wins_and_a_retirement_adds_the_text(graph_store: GraphStore) -> None:
    e = ep(1)
    graph_store.upsert_episodes([e], links([e]))
    c = change("run-1", 1)
    graph_store.archive_before(c, TEAM, [ItemRef("Episode", e.id)])
    graph_store.update_episodes([EpisodeUpdate(id=e.id, status=EpisodeStatus.ABSORBED, schema_absorbed=1)])
    graph_store.archive_before(c, TEAM, [ItemRef("Episode", e.id, text=True), ItemRef("Tombstone", e.id)])
    graph_store.retire_episodes([Retirement(e.id, EpisodeStatus.RETIRED, T0, "absorbed", "pat-1")])
    (image, tomb) = graph_store.archived_items("run-1")
    assert (image.label, image.existed, image.text) == ("Episode", True, e.text)
    assert '"status":"raw"' in image.props and (tomb.label, tomb.existed) == ("Tombstone", False)
    assert graph_store.get_episodes([e.id])[0].text in ("", None)

    graph_store.restore_archived([image, tomb])
    (back,) = graph_store.get_episodes([e.id])
    assert back.status is EpisodeStatus.RAW and back.text == e.text and back.schema_absorbed == 0
    assert graph_store.tombstones(TEAM) == []
    assert graph_store.get_change("run-1") == c.model_copy(update={"teams": (TEAM,)})


def test_what_a_change_created_goes_and_what_it_changed_comes_back_with_its_links(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(3)]
    graph_store.upsert_episodes(eps, links(eps))
    graph_store.write_pattern(
        pat("pat-old", evidence_ids=[eps[0].id]), ["platform/topic/deploys"], [EpisodeUpdate(id=eps[0].id)]
    )
    graph_store.write_pattern(pat("pat-other"), [], [])
    graph_store.link_unrelated([("pat-old", "pat-other")], "reflect-v1")
    graph_store.set_meta("watermark:platform", "100")
    links_before, edges_before = graph_store.pattern_links(TEAM), graph_store.pattern_edges(TEAM)
    entities_before = graph_store.counts().entities
    c = change("run-2", 2)
    new = pat("pat-new", evidence_ids=[eps[1].id, eps[2].id])
    refs = [
        ItemRef("Pattern", "pat-new"),
        ItemRef("Entity", "platform/topic/brand-new"),
        ItemRef("Episode", eps[1].id),
        ItemRef("Episode", eps[2].id),
        ItemRef("Pattern", "pat-old"),
        ItemRef("Contradiction", "con-1"),
        ItemRef("Meta", "watermark:platform"),
        ItemRef("Meta", "journal:platform"),
    ]
    graph_store.archive_before(c, TEAM, refs)
    absorbed = [
        EpisodeUpdate(id=i, status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=T0, absorbed_by="pat-new")
        for i in (eps[1].id, eps[2].id)
    ]
    graph_store.write_pattern(new, ["platform/topic/brand-new"], absorbed)
    graph_store.link_patterns("pat-old", "pat-new", "refines")
    graph_store.link_unrelated([("pat-old", "pat-other")], "reflect-v2")
    graph_store.update_patterns(
        [PatternUpdate(id="pat-old", status=PatternStatus.CONTESTED, updated_at=T0 + timedelta(days=1))]
    )
    graph_store.open_contradiction(contra("con-1", "pat-old", "pat-new"), counter=2, old_confidence=0.3)
    graph_store.queue_alerts([alert("con-1:dev", kind="contradiction", contradiction_id="con-1")])
    graph_store.set_meta("watermark:platform", "200")
    graph_store.set_meta("journal:platform", "{...}")

    items = graph_store.archived_items("run-2")
    assert {(a.label, a.key): a.existed for a in items} == {
        ("Contradiction", "con-1"): False,
        ("Entity", "platform/topic/brand-new"): False,
        ("Episode", eps[1].id): True,
        ("Episode", eps[2].id): True,
        ("Meta", "journal:platform"): False,
        ("Meta", "watermark:platform"): True,
        ("Pattern", "pat-new"): False,
        ("Pattern", "pat-old"): True,
    }
    order = {"Contradiction": 0, "Pattern": 1, "Tombstone": 2, "Episode": 3, "Meta": 4, "Entity": 5}
    graph_store.restore_archived(sorted(items, key=lambda a: order[a.label]))
    assert [p.id for p in graph_store.patterns(TEAM)] == ["pat-old", "pat-other"]
    assert graph_store.patterns_by_id(["pat-old"])[0].status is PatternStatus.TENTATIVE
    assert graph_store.pattern_links(TEAM) == links_before and graph_store.pattern_edges(TEAM) == edges_before
    assert graph_store.contradictions(TEAM) == [] and graph_store.counts().entities == entities_before
    assert graph_store.get_meta("watermark:platform") == "100" and graph_store.get_meta("journal:platform") is None
    assert all(
        e.status is EpisodeStatus.RAW and e.absorbed_by is None
        for e in graph_store.get_episodes([eps[1].id, eps[2].id])
    )
    graph_store.restore_archived(items)  # idempotent
    assert [p.id for p in graph_store.patterns(TEAM)] == ["pat-old", "pat-other"]


def test_later_changes_are_those_that_wrote_the_same_items_and_are_not_undone(graph_store: GraphStore) -> None:
    graph_store.write_pattern(pat("pat-1"), [], [])
    graph_store.write_pattern(pat("pat-2"), [], [])
    graph_store.archive_before(change("a", 1), TEAM, [ItemRef("Pattern", "pat-1")])
    graph_store.archive_before(change("b", 2), TEAM, [ItemRef("Pattern", "pat-2")])
    graph_store.archive_before(change("c", 3), TEAM, [ItemRef("Pattern", "pat-1"), ItemRef("Pattern", "pat-2")])
    graph_store.archive_before(change("d", 4), TEAM, [ItemRef("Pattern", "pat-1")])
    assert [c.id for c in graph_store.later_changes("a")] == ["c", "d"]
    assert [c.id for c in graph_store.later_changes("b")] == ["c"]
    assert graph_store.later_changes("d") == []
    graph_store.mark_undone("d", T0, "cli:ops", "wrong")
    graph_store.mark_undone("d", T0 + timedelta(days=1), "cli:other", "again")  # the first undo stays
    assert [c.id for c in graph_store.later_changes("a")] == ["c"]
    d = graph_store.get_change("d")
    assert d is not None and (d.undone_at, d.undone_by, d.undo_reason) == (T0, "cli:ops", "wrong")


def test_the_archive_is_purged_by_age_counted_and_forgotten_on_request(graph_store: GraphStore) -> None:
    eps = [ep(i) for i in range(2)]
    graph_store.upsert_episodes(eps, links(eps))
    old, new = change("old", 1, at_days=0), change("new", 2, at_days=20)
    for c in (old, new):
        graph_store.archive_before(c, TEAM, [ItemRef("Episode", e.id, text=True) for e in eps])
    counts = graph_store.archive_counts(TEAM)
    assert (counts.changes, counts.items, counts.texts, counts.oldest) == (2, 4, 4, T0)
    assert counts.bytes > sum(len(e.text) for e in eps) * 2
    assert graph_store.counts(TEAM).archived_texts == 4 and graph_store.archive_counts("ops").items == 0
    assert graph_store.archived_texts([eps[0].id]) == {eps[0].id: eps[0].text}

    assert graph_store.purge_archive(T0 + timedelta(days=10), T0 + timedelta(days=40)) == ["old"]
    assert graph_store.purge_archive(T0 + timedelta(days=10), T0 + timedelta(days=41)) == []
    assert graph_store.get_change("old").purged_at == T0 + timedelta(days=40)  # type: ignore[union-attr]
    assert graph_store.archived_items("old") == [] and len(graph_store.archived_items("new")) == 2

    assert graph_store.forget_archived("Episode", [eps[0].id]) == 1
    assert graph_store.archived_texts([e.id for e in eps]) == {eps[1].id: eps[1].text}


def test_revive_gives_a_retired_message_its_text_back(graph_store: GraphStore) -> None:
    e = ep(1, absorbed_by="pat-1", status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=T0)
    graph_store.upsert_episodes([e], links([e]))
    graph_store.retire_episodes([Retirement(e.id, EpisodeStatus.RETIRED, T0, "absorbed", "pat-1")])
    graph_store.revive_episodes({e.id: e.text, "ep-unknown": "x"})
    (back,) = graph_store.get_episodes([e.id])
    assert (back.status, back.text, back.absorbed_by, back.schema_absorbed) == (EpisodeStatus.RAW, e.text, None, 0)
    assert graph_store.tombstones(TEAM) == [] and graph_store.live_ids(TEAM, "episode") == {e.id}
    graph_store.revive_episodes({e.id: "other text"})  # a raw one is left as it is
    assert graph_store.get_episodes([e.id])[0].text == e.text


def test_withdrawn_alerts_are_re_keyed_and_the_unsent_ones_dropped(graph_store: GraphStore) -> None:
    graph_store.write_pattern(pat("pat-old"), [], [])
    graph_store.write_pattern(pat("pat-new"), [], [])
    graph_store.open_contradiction(contra("con-1"), counter=0, old_confidence=0.5)
    graph_store.queue_alerts(
        [alert(f"con-1:{ch}", channel=ch, kind="contradiction", contradiction_id="con-1") for ch in ("a", "b")]
    )
    assert graph_store.mark_alert_delivered("con-1:a", T0, "msg-7")
    graph_store.withdraw_alerts(["con-1:a", "con-1:b", "con-1:nope"], "~undone:run-9", "withdrawn: run-9 undone")
    got = {a.key: (a.status, a.dropped_reason, a.message_ref) for a in graph_store.alerts()}
    assert got == {
        "con-1:a~undone:run-9": ("delivered", None, "msg-7"),
        "con-1:b~undone:run-9": ("dropped", "withdrawn: run-9 undone", None),
    }
    # The contradiction may be alerted again under its own key.
    graph_store.queue_alerts([alert("con-1:a", channel="a", kind="contradiction", contradiction_id="con-1")])
    assert graph_store.count_alerts("pending") == 1


def test_a_run_is_read_back_by_id_with_who_undid_it(graph_store: GraphStore) -> None:
    r = run("run-7", T0).model_copy(
        update={"undone_at": T0 + timedelta(hours=1), "undone_by": "cli:ops", "undo_reason": "x"}
    )
    graph_store.save_run(r)
    assert graph_store.get_run("run-7") == r and graph_store.get_run("nope") is None
