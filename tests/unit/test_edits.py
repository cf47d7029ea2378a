"""Edited messages and threads on the in-memory fakes: validation (file, line, field, why), what an
edit replaces, which versions are no-ops, what stays an error, and the beliefs an edit leaves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from taskzilla_sleep.core.models import EpisodeStatus, Pattern, PatternKind, PatternStatus
from taskzilla_sleep.memory.admin.forget import forget_episode
from taskzilla_sleep.memory.ingest import EpisodeFileError, Ingestor, Limits, WriteDiscipline, parse_episode_lines
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import EpisodeUpdate

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TS = "2026-11-30T10:00:00+01:00"


def line(i: int = 1, **over: object) -> str:
    obj: dict[str, object] = {
        "id": f"slack-{i}",
        "team": "platform",
        "channel": "deploys",
        "author": ["sara", "tom", "ana"][i % 3],
        "text": f"no deploys on Fridays, says {i}",
        "ts": TS,
        "provenance": "human",
    }
    obj.update(over)
    return json.dumps({k: v for k, v in obj.items() if v is not None})


def at(minutes: int) -> str:
    return (datetime.fromisoformat(TS) + timedelta(minutes=minutes)).isoformat()


def make() -> tuple[Ingestor, MemoryGraphStore, MemoryVectorStore]:
    g, v = MemoryGraphStore(), MemoryVectorStore()
    return Ingestor(g, v, EntityExtractor(), WriteDiscipline({}), Limits(), lambda: NOW), g, v


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        (line(edited_at="2026-11-30T11:00:00"), "edited_at", "timestamp has no timezone"),
        (line(edited_at=1764493320), "edited_at", "a number is not a timestamp with a time zone"),
        (line(edited_at=at(-1)), "edited_at", "is before the message's ts"),
        (line(edited_at="2027-06-01T00:00:00+00:00"), "edited_at", "more than 24 h after the ingest clock"),
        (line(reply_to="slack 1"), "reply_to", "not allowed"),
        (line(reply_to="slack-1"), "reply_to", "a message cannot answer itself"),
        (line(thread_id=""), "thread_id", "not allowed"),
        (line(parent="slack-0"), "parent", "allowed: id, team, channel, author, text, ts, provenance, connector, "),
    ],
)
def test_bad_thread_and_edit_fields_name_line_field_and_reason(bad: str, field: str, reason: str) -> None:
    with pytest.raises(EpisodeFileError) as info:
        parse_episode_lines([line(2), bad], "week.jsonl", Limits(), NOW)
    err = info.value.errors[0]
    assert (err.source, err.line, err.field) == ("week.jsonl", 2, field)
    assert reason in err.reason


def test_an_unknown_field_names_the_thread_and_edit_fields_as_allowed() -> None:
    with pytest.raises(EpisodeFileError) as info:
        parse_episode_lines([line(parent="slack-0")], "week.jsonl", Limits(), NOW)
    assert "thread_id, reply_to, edited_at" in info.value.errors[0].reason


def test_a_newer_edit_replaces_text_and_vector_an_older_one_is_a_no_op() -> None:
    ing, g, v = make()
    ing.ingest_lines([line(1, text="standup at 9")], "a.jsonl")
    before = v.embeddings("platform", "episodes", ["slack-1"])["slack-1"]

    report = ing.ingest_lines([line(1, text="standup at 10", edited_at=at(5))], "b.jsonl")

    assert (report.new, report.edited, report.present, report.edited_ids) == (0, 1, 0, ["slack-1"])
    assert "1 edited" in report.summary()
    (got,) = g.get_episodes(["slack-1"])
    assert (got.text, got.edited_at) == ("standup at 10", datetime.fromisoformat(at(5)))
    after = v.embeddings("platform", "episodes", ["slack-1"])["slack-1"]
    # The store keeps float32 values, as Chroma does.
    assert after != before and after == pytest.approx(v._embedder.embed(["standup at 10"])[0], abs=1e-7)
    assert not g.stored_episodes(["slack-1"])["slack-1"].edit_pending

    # As old or older, the original itself included: nothing changes, nothing fails.
    for older in (line(1, text="standup at 8", edited_at=at(5)), line(1, text="standup at 7", edited_at=at(2))):
        assert ing.ingest_lines([older], "c.jsonl").edited == 0
    assert ing.ingest_lines([line(1, text="standup at 9")], "d.jsonl").present == 1
    assert g.get_episodes(["slack-1"])[0].text == "standup at 10"


def test_the_same_id_with_other_text_and_no_edit_time_stays_an_error() -> None:
    ing, g, _ = make()
    ing.ingest_lines([line(1, text="standup at 9")], "a.jsonl")
    with pytest.raises(EpisodeFileError) as info:
        ing.ingest_lines([line(2), line(1, text="standup at 10")], "b.jsonl")
    err = info.value.errors[0]
    assert (err.line, err.field) == (2, "id") and "already stored with other content: text" in err.reason
    # An edit is of the text only: another author under the same id is another message.
    with pytest.raises(EpisodeFileError) as moved:
        ing.ingest_lines([line(1, author="mallory", text="standup at 11", edited_at=at(9))], "c.jsonl")
    assert "author 'mallory'" in moved.value.errors[0].reason
    assert [e.id for e in g.episodes_by_status("platform", ["raw"])] == ["slack-1"]  # nothing written


def test_an_id_of_another_team_is_only_said_to_be_taken_edit_or_not() -> None:
    ing, _, _ = make()
    ing.ingest_lines([line(1, text="the vault password rotates on Mondays", author="secretive")], "a.jsonl")
    for extra in ({}, {"edited_at": at(30)}):
        with pytest.raises(EpisodeFileError) as info:
            ing.ingest_lines([line(1, team="ops", text="standup moved", **extra)], "ops.jsonl")
        shown = str(info.value)
        assert "already used by another message" in shown
        assert all(w not in shown for w in ("vault", "secretive", "platform", "Mondays")), shown


def test_two_versions_in_one_file_store_the_newest_and_two_texts_of_one_edit_time_are_an_error() -> None:
    ing, g, _ = make()
    report = ing.ingest_lines(
        [line(1, text="v2", edited_at=at(2)), line(1, text="v1"), line(1, text="v3", edited_at=at(3))], "a.jsonl"
    )
    assert report.new == 1 and g.get_episodes(["slack-1"])[0].text == "v3"
    with pytest.raises(EpisodeFileError) as info:
        ing.ingest_lines([line(2, text="a", edited_at=at(4)), line(2, text="b", edited_at=at(4))], "b.jsonl")
    assert (info.value.errors[0].line, info.value.errors[0].field) == (2, "id")


def test_an_edit_leaves_the_belief_it_fed_and_its_message_comes_back_into_recall() -> None:
    ing, g, v = make()
    ing.ingest_lines([line(i) for i in (1, 2, 3)], "a.jsonl")
    ids = ["slack-1", "slack-2", "slack-3"]
    belief = Pattern(
        id="pat-friday",
        team="platform",
        statement="No deploys on Fridays.",
        kind=PatternKind.NORM,
        status=PatternStatus.ACTIVE,
        confidence=0.8,
        evidence_ids=ids,
        support_count=3,
        distinct_authors=3,
        distinct_channels=1,
        first_seen=NOW,
        last_seen=NOW,
        created_at=NOW,
        updated_at=NOW,
        valid_from=NOW,
    )
    absorbed = [EpisodeUpdate(id=i, status=EpisodeStatus.ABSORBED, absorbed_by=belief.id, absorbed_at=NOW) for i in ids]
    g.write_pattern(belief, [], absorbed)

    ing.ingest_lines([line(2, text="lunch is at noon, see you all", edited_at=at(60))], "b.jsonl")

    (edited,) = g.get_episodes(["slack-2"])
    assert (edited.status, edited.absorbed_by, edited.distilled_at) == (EpisodeStatus.RAW, None, None)
    (after,) = g.patterns_by_id(["pat-friday"])
    assert after.evidence_ids == ["slack-1", "slack-3"] and after.support_count == 2
    assert "slack-2" not in g.pattern_edges("platform")["pat-friday"].evidence
    assert after.confidence < belief.confidence
    cards = g.episode_cards(["slack-2"], drafts=False)
    assert cards["slack-2"].absorbed_by is None  # no belief hides it from recall any more
    stored = v.embeddings("platform", "episodes", ["slack-2"])["slack-2"]
    assert stored == pytest.approx(v._embedder.embed([edited.text])[0], abs=1e-7)  # float32, as Chroma keeps it


def test_an_edit_of_a_forgotten_message_never_brings_its_text_back() -> None:
    ing, g, v = make()
    ing.ingest_lines([line(1, text="my phone number is 555-0100")], "a.jsonl")
    forget_episode(g, v, "platform", "slack-1", "sara", "asked to", NOW)

    report = ing.ingest_lines([line(1, text="my phone is 555-0199", edited_at=at(10))], "b.jsonl")

    assert (report.edited, report.edits_ignored) == (0, 1)
    (got,) = g.get_episodes(["slack-1"])
    assert (got.status, got.text) == (EpisodeStatus.FORGOTTEN, "")
    assert v.present("platform", "episodes", ["slack-1"]) == set()


def test_a_crash_after_the_graph_write_is_finished_by_the_rerun(monkeypatch: pytest.MonkeyPatch) -> None:
    from taskzilla_sleep.memory import ingest as ingest_module

    ing, g, v = make()
    ing.ingest_lines([line(1, text="standup at 9")], "a.jsonl")

    def crash(name: str) -> None:
        if name == "ingest.after_edit":
            raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module, "crashpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        ing.ingest_lines([line(1, text="standup at 10", edited_at=at(5))], "b.jsonl")
    monkeypatch.undo()
    assert g.stored_episodes(["slack-1"])["slack-1"].edit_pending
    assert v.cols[("platform", "episodes")]["slack-1"][1] == "standup at 9"  # the vector is still the old text

    rerun = ing.ingest_lines([line(1, text="standup at 10", edited_at=at(5))], "b.jsonl")

    assert rerun.edited_ids == ["slack-1"]
    assert v.cols[("platform", "episodes")]["slack-1"][1] == "standup at 10"
    assert not g.stored_episodes(["slack-1"])["slack-1"].edit_pending


def test_replies_are_linked_in_the_graph_whichever_arrives_first() -> None:
    ing, g, _ = make()
    ing.ingest_lines([line(2, text="never on Fridays", reply_to="slack-1", thread_id="slack-1")], "a.jsonl")
    assert g.replies("platform") == []
    ing.ingest_lines([line(1, text="do we deploy on Fridays?", thread_id="slack-1")], "b.jsonl")
    assert g.replies("platform") == [("slack-2", "slack-1")]
    (reply,) = g.get_episodes(["slack-2"])
    assert (reply.reply_to, reply.thread_id) == ("slack-1", "slack-1")
