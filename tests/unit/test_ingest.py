from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest

from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.core.settings import ConnectorRule
from taskzilla_sleep.memory.ingest import EpisodeFileError, Ingestor, Limits, WriteDiscipline, parse_episode_lines
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.progress import Progress
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def line(**over: object) -> str:
    obj: dict[str, object] = {
        "team": "platform",
        "channel": "dev",
        "author": "martin",
        "text": "keep PRs small",
        "ts": "2026-11-30T10:02:00+01:00",
        "provenance": "human",
    }
    obj.update(over)
    return json.dumps({k: v for k, v in obj.items() if v is not None})


def make(
    graph: MemoryGraphStore | None = None, vectors: MemoryVectorStore | None = None, **rules: ConnectorRule
) -> tuple[Ingestor, MemoryGraphStore, MemoryVectorStore]:
    g = graph or MemoryGraphStore()
    v = vectors or MemoryVectorStore()
    ing = Ingestor(
        g, v, EntityExtractor(["billing-api"], ["grafana"]), WriteDiscipline(rules), Limits(200), lambda: NOW
    )
    return ing, g, v


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        (line(ts="2026-11-30T10:02:00"), "ts", "timestamp has no timezone"),
        (line(provenance="robot"), "provenance", "must be one of human, bot, ai-draft, import"),
        (line(team=None), "team", "required field is missing"),
        (line(mood="happy"), "mood", "unknown field"),
        (line(text="x" * 201), "text", "the limit is 200"),
        (line(text="   "), "text", "text is blank"),
        (line(ts="yesterday"), "ts", "datetime"),
        (line(team="plat form"), "team", "not allowed"),
        # A number is Unix seconds to pydantic: a guess at UTC, not a timestamp with a zone.
        (line(ts=1764493320), "ts", "a number is not a timestamp with a time zone"),
        (line(ts="1764493320"), "ts", "a number is not a timestamp with a time zone"),
        # Outside the sane window (ingest.earliest_ts, the ingest clock + ingest.max_future_hours).
        (line(ts="0001-01-01T00:00:00+01:00"), "ts", "is before 2000-01-01T00:00:00+00:00 (ingest.earliest_ts)"),
        (line(ts="9999-12-31T23:59:59-05:00"), "ts", "more than 24 h after the ingest clock"),
        # Characters no store can carry (json.dumps writes them as \u escapes, as a bot's JSON would).
        (line(text="half of the file\u0000"), "text", "character 17 is U+0000 (NUL), which the stores cannot hold"),
        (line(author="x\ud800"), "author", "U+D800 (a lone surrogate)"),
        (line(channel="dev\udfff"), "channel", "U+DFFF (a lone surrogate)"),
        (line(connector="sl\u0000ck"), "connector", "U+0000 (NUL)"),
    ],
)
def test_bad_line_names_line_field_and_reason(bad: str, field: str, reason: str) -> None:
    lines = [line(text=f"episode {i}") for i in range(6)] + [bad] + [line(text="after")]
    with pytest.raises(EpisodeFileError) as info:
        parse_episode_lines(lines, "week.jsonl", Limits(200), NOW)
    err = info.value.errors[0]
    assert (err.source, err.line, err.field) == ("week.jsonl", 7, field)
    assert reason in err.reason
    assert str(info.value).startswith(f"week.jsonl:7: field '{field}'")


def test_not_json_and_not_object() -> None:
    with pytest.raises(EpisodeFileError, match=r"f:2: not valid JSON") as info:
        parse_episode_lines([line(), "{nope", "[1]"], "f", Limits(200), NOW)
    assert [e.line for e in info.value.errors] == [2, 3]
    assert "expected a JSON object" in info.value.errors[1].reason


def test_blank_lines_are_allowed_and_counted_in_line_numbers() -> None:
    items = parse_episode_lines(["", line(), "  ", line(text="b")], "f", Limits(200), NOW)
    assert [n for n, _ in items] == [2, 4]


def test_bad_file_writes_nothing_to_either_store() -> None:
    ing, g, v = make()
    lines = [line(text=f"e{i}") for i in range(6)] + [line(provenance="robot")]
    with pytest.raises(EpisodeFileError):
        ing.ingest_lines(lines, "week.jsonl")
    assert g.episode_nodes == {} and v.cols == {}


def test_ingest_then_reingest_is_a_noop() -> None:
    ing, g, v = make()
    lines = [line(text=f"episode {i}", author=f"p{i}") for i in range(5)]
    first = ing.ingest_lines(lines, "f")
    assert (first.new, first.present, first.skipped) == (5, 0, 0)
    assert v.count("platform", "episodes") == 5
    again = ing.ingest_lines(lines, "f")
    assert (again.new, again.present, again.skipped) == (0, 5, 0)
    assert again.summary() == "0 new, 5 already present, 0 skipped by write discipline"
    assert len(g.episode_nodes) == 5 and v.count("platform", "episodes") == 5


def test_ids_are_content_derived_and_explicit_ids_kept() -> None:
    ing, g, _ = make()
    ing.ingest_lines([line(), line(id="msg-42", text="other")], "f")
    assert "msg-42" in g.episode_nodes
    derived = [i for i in g.episode_nodes if i != "msg-42"]
    assert len(derived) == 1 and derived[0].startswith("ep_")


def test_same_id_with_different_text_in_one_file_is_rejected() -> None:
    ing, g, _ = make()
    with pytest.raises(EpisodeFileError, match=r"f:2: field 'id': id 'm1' is already used by line 1") as info:
        ing.ingest_lines([line(id="m1"), line(id="m1", text="changed")], "f")
    assert g.episode_nodes == {}
    assert str(info.value).endswith("line 1: text 'changed' (line 1: 'keep PRs small')")
    with pytest.raises(EpisodeFileError, match=r"f:3: field 'id': .* team 'ops' \(line 1: 'platform'\)"):
        ing.ingest_lines([line(id="m1"), line(text="other"), line(id="m1", team="ops")], "f")
    assert ing.ingest_lines([line(id="m1"), line(id="m1")], "f").new == 1  # the same message twice: one


def test_write_discipline_skips_counts_and_stores_nothing() -> None:
    gh = ConnectorRule(connected=True, patterns=[r"^\[github\]"])
    off = ConnectorRule(connected=False, patterns=[r"^\[jira\]"])
    ing, g, v = make(github=gh, jira=off)
    rep = ing.ingest_lines([line(text="[github] PR #1 merged"), line(text="[jira] ABC-1 moved"), line()], "f")
    assert (rep.new, rep.skipped, rep.skipped_by_connector) == (2, 1, {"github": 1})
    assert not any(e.text.startswith("[github]") for e in g.episode_nodes.values())
    assert v.count("platform", "episodes") == 2


def test_entities_are_linked() -> None:
    ing, g, _ = make()
    ing.ingest_lines([line(text="@sara the billing-api alert in Grafana is noisy #oncall", channel="ops")], "f")
    roles = sorted((key.split("/", 1)[1], role) for _, key, role in g.mentions)
    assert roles == [
        ("channel/ops", "channel"),
        ("person/martin", "author"),
        ("person/sara", "mention"),
        ("project/billing-api", "project"),
        ("tool/grafana", "tool"),
        ("topic/oncall", "tag"),
    ]


def test_crash_between_graph_and_vectors_is_repaired_by_rerun() -> None:
    ing, g, v = make()
    lines = [line(text=f"episode {i}") for i in range(4)]
    v.fail_next = RuntimeError("killed between the two writes")
    with pytest.raises(RuntimeError):
        ing.ingest_lines(lines, "f")
    assert len(g.episode_nodes) == 4 and v.count("platform", "episodes") == 0
    rep = ing.ingest_lines(lines, "f")
    assert (rep.new, rep.present, rep.vectors_repaired) == (0, 4, 4)
    assert v.count("platform", "episodes") == 4


def test_ctrl_c_between_vector_batches_keeps_what_was_stored_and_the_rerun_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from taskzilla_sleep.interfaces import cli_ops
    from taskzilla_sleep.memory import ingest

    monkeypatch.setattr(ingest, "EMBED_BATCH", 2)
    ing, g, v = make()
    lines = [line(text=f"episode {i}") for i in range(5)]
    ticks = iter(float(t) for t in range(0, 1000, 2))  # each clock reading is 2 s after the last
    out = io.StringIO()
    shown = Progress("ingest", "json", stream=out, clock=lambda: next(ticks))
    on_change = cli_ops.ingest_progress(shown, len(lines))

    def interrupt_after_the_first_batch(p: ingest.IngestProgress) -> None:
        on_change(p)
        if p.embedded == 2:
            raise KeyboardInterrupt

    progress = ingest.IngestProgress(on_change=interrupt_after_the_first_batch)
    with pytest.raises(KeyboardInterrupt):
        ing.ingest_lines(lines, "f", progress)
    assert len(g.episode_nodes) == 5 and v.count("platform", "episodes") == 2
    note = cli_ops.interrupted_note("f", progress)
    assert note.startswith("interrupted: 5 new episodes from f were stored") and "2 of 5 vectors written" in note
    assert "3 of them have no vector yet" in note and "re-run the same command" in note
    told = [json.loads(ln) for ln in out.getvalue().splitlines()]
    assert [(e["phase"], e["done"], e["total"], e["unit"], e.get("note")) for e in told] == [
        ("graph", 0, 5, "episodes", "5 lines read, 5 episodes valid; 0 already present, 0 skipped; writing the graph"),
        ("embed", 0, 5, "vectors", "5 new episodes stored in the graph; embedding 5"),
        ("embed", 2, 5, "vectors", None),  # over 1 s after the event before
    ]

    rep = ing.ingest_lines(lines, "f")  # what the note promises: the same command finishes the job
    assert (rep.new, rep.present, rep.vectors_repaired) == (0, 5, 3)
    assert reconcile(g, v, repair=False).drift == 0
    before = ingest.IngestProgress()
    assert cli_ops.interrupted_note("f", before) == "interrupted before anything from f was stored; " + (
        "re-run the same command to finish the job"
    )


def test_reconcile_repairs_both_directions() -> None:
    ing, g, v = make()
    ing.ingest_lines([line(text=f"episode {i}") for i in range(4)], "f")
    gone = sorted(g.episode_nodes)[0]
    v.delete("platform", "episodes", [gone])
    retired = sorted(g.episode_nodes)[1]
    g.episode_nodes[retired].status = EpisodeStatus.RETIRED  # its vector is now an orphan
    check = reconcile(g, v, repair=False)
    assert (check.missing, check.orphans, check.repaired) == (1, 1, 0)
    fixed = reconcile(g, v)
    assert (fixed.missing, fixed.orphans, fixed.repaired) == (1, 1, 2)
    assert v.present("platform", "episodes") == {i for i, e in g.episode_nodes.items() if e.status != "retired"}
    assert reconcile(g, v).drift == 0


def test_retired_episode_reingested_stays_retired_without_vector() -> None:
    ing, g, v = make()
    ing.ingest_lines([line()], "f")
    (eid,) = g.episode_nodes
    g.episode_nodes[eid].status = EpisodeStatus.RETIRED
    v.delete("platform", "episodes", [eid])
    rep = ing.ingest_lines([line()], "f")
    assert (rep.new, rep.present) == (0, 1)
    assert v.count("platform", "episodes") == 0


def test_default_chatter_rule_skips_content_free_messages_only() -> None:
    from taskzilla_sleep.core.settings import load_settings

    rules = load_settings(env={}).ingest.write_discipline
    ing, g, v = make(**rules)
    chatter = ["+1", "LGTM!", "thanks!", "👍", "good morning all", "hi team", "looks good to me", "ok"]
    kept = [
        "+1, always staging before production, never straight to prod",
        "thanks, from now on reviews need two approvals",
        "ok so we deploy on fridays now",
        "morning standup moves to voice from next week",
    ]
    lines = [line(text=t, ts=f"2026-11-30T10:{i:02d}:00+01:00") for i, t in enumerate(chatter + kept)]
    report = ing.ingest_lines(lines, "day.jsonl")
    assert (report.new, report.skipped, report.skipped_by_connector) == (len(kept), len(chatter), {"chatter": 8})
    assert sorted(e.text for e in g.episode_nodes.values()) == sorted(kept)
    assert v.present("platform", "episodes") == set(g.episode_nodes)

    # Turned off, chatter is stored like anything else.
    off = {**rules, "chatter": rules["chatter"].model_copy(update={"connected": False})}
    ing2, g2, _ = make(**off)
    assert ing2.ingest_lines(lines, "day.jsonl").new == len(chatter) + len(kept)


def test_timestamp_window_follows_the_ingest_clock_and_the_settings() -> None:
    from datetime import timedelta

    from taskzilla_sleep.core.settings import load_settings

    limits = Limits.of(load_settings(env={}).ingest)
    assert (limits.earliest_ts, limits.max_future) == (datetime(2000, 1, 1, tzinfo=UTC), timedelta(hours=24))
    edge = (NOW + timedelta(hours=24)).isoformat()
    assert len(parse_episode_lines([line(ts=edge)], "f", limits, NOW)) == 1
    late = (NOW + timedelta(hours=24, seconds=1)).isoformat()
    with pytest.raises(EpisodeFileError, match=r"f:1: field 'ts': .* after the ingest clock 2026-11-30T12:00:00"):
        parse_episode_lines([line(ts=late)], "f", limits, NOW)
    env = {"TASKZILLA__INGEST__EARLIEST_TS": "2026-01-01T00:00:00+00:00", "TASKZILLA__INGEST__MAX_FUTURE_HOURS": "0"}
    strict = Limits.of(load_settings(env=env).ingest)
    with pytest.raises(EpisodeFileError) as info:
        parse_episode_lines([line(ts="2025-12-31T23:59:00Z"), line(ts="2026-11-30T12:01:00Z")], "f", strict, NOW)
    assert [(e.line, e.field) for e in info.value.errors] == [(1, "ts"), (2, "ts")]
    assert "(ingest.earliest_ts)" in info.value.errors[0].reason
    assert "more than 0 h after" in info.value.errors[1].reason


def test_ingest_items_checks_the_window_too() -> None:
    from taskzilla_sleep.core.models import EpisodeIn

    ing, g, v = make()
    ok = EpisodeIn.model_validate(json.loads(line()))
    old = ok.model_copy(update={"ts": datetime(1999, 12, 31, tzinfo=UTC)})
    with pytest.raises(EpisodeFileError, match=r"api:1: field 'ts': 1999-12-31T00:00:00\+00:00 is before"):
        ing.ingest_items([ok, old])
    assert g.episode_nodes == {} and v.cols == {}


def test_same_id_same_content_is_a_noop_even_written_another_way() -> None:
    ing, g, v = make()
    assert ing.ingest_lines([line(id="m1")], "f").new == 1
    # The same instant in another zone is the same message.
    again = ing.ingest_lines([line(id="m1", ts="2026-11-30T09:02:00Z")], "f")
    assert (again.new, again.present) == (0, 1)
    assert len(g.episode_nodes) == 1 and v.count("platform", "episodes") == 1


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"text": "we deploy on fridays from now on, every single week"},
            "text 'we deploy on fridays from now on, every…' (stored: 'keep PRs small')",
        ),
        ({"channel": "ops", "author": "sara"}, "channel 'ops' (stored: 'dev'), author 'sara' (stored: 'martin')"),
        ({"ts": "2026-11-30T11:00:00+01:00"}, "ts 2026-11-30T10:00:00+00:00 (stored: 2026-11-30T09:02:00+00:00)"),
        ({"provenance": "bot"}, "provenance 'bot' (stored: 'human')"),
    ],
)
def test_an_id_stored_with_other_content_is_an_error_and_nothing_is_written(
    change: dict[str, str], expected: str
) -> None:
    ing, g, v = make()
    ing.ingest_lines([line(id="m1")], "first.jsonl")
    lines = [line(text="a new message", author="p1"), line(id="m1", **change), line(text="another", author="p2")]
    with pytest.raises(EpisodeFileError) as info:
        ing.ingest_lines(lines, "second.jsonl")
    assert str(info.value) == f"second.jsonl:2: field 'id': id 'm1' is already stored with other content: {expected}"
    assert list(g.episode_nodes) == ["m1"] and g.episode_nodes["m1"].text == "keep PRs small"
    assert v.present("platform", "episodes") == {"m1"}


@pytest.mark.parametrize("retired", [False, True])
def test_an_id_of_another_teams_message_is_refused_quoting_nothing_of_it(retired: bool) -> None:
    ing, g, v = make()
    ing.ingest_lines([line(id="msg-1001", channel="payroll", author="lena", text="salaries move to the 25th")], "a")
    if retired:  # decay dropped the text; the hash and the other fields stay
        g.episode_nodes["msg-1001"].status = EpisodeStatus.RETIRED
    for clash in (line(id="msg-1001", team="ops"), line(id="msg-1001", team="ops", text="salaries move to the 25th")):
        with pytest.raises(EpisodeFileError) as info:
            ing.ingest_lines([line(team="ops", text="first", author="p1"), clash], "b.jsonl")
        said = str(info.value)
        assert said == (
            "b.jsonl:2: field 'id': id 'msg-1001' is already used by another message (ids are unique per store: "
            "prefix a connector's ids, e.g. tg-<chat>-<message>, or leave id out)"
        )
        for secret in ("platform", "payroll", "lena", "salaries", "2026", g.hashes["msg-1001"]):
            assert secret not in said
    assert v.teams() == ["platform"] and list(g.episode_nodes) == ["msg-1001"]


def test_a_reused_id_is_found_after_the_text_was_dropped() -> None:
    ing, g, v = make()
    ing.ingest_lines([line(id="m1"), line(id="m2", text="older news")], "f")
    for i in ("m1", "m2"):
        g.episode_nodes[i].status = EpisodeStatus.RETIRED  # decay dropped the texts; the hashes stay
    with pytest.raises(EpisodeFileError, match=r"f:1: .*: text 'other' \(the stored text was dropped when the episode"):
        ing.ingest_lines([line(id="m1", text="other")], "f")
    assert (ing.ingest_lines([line(id="m1")], "f").present, g.episode_nodes["m1"].status) == (1, EpisodeStatus.RETIRED)
    # Stored before hashes were kept: what is still on the node decides (here only the text differs: a no-op).
    del g.hashes["m2"]
    assert ing.ingest_lines([line(id="m2", text="changed")], "f").present == 1
    with pytest.raises(EpisodeFileError, match=r"id 'm2' is already used by another message \(ids are unique"):
        ing.ingest_lines([line(id="m2", team="ops")], "f")


def test_run_once_progress_names_each_step_and_what_an_interruption_left() -> None:
    from taskzilla_sleep.interfaces import cli_ops

    now = [0.0]
    out = FakeTty()
    lines = cli_ops.StepLines(
        ["prune", "distill", "reflect"], Progress("run-once", "bar", stream=out, clock=lambda: now[0])
    )
    assert lines.before_step("prune")
    now[0] = 1.5
    assert lines.before_step("distill")
    assert lines.interrupted_note() == (
        "interrupted during distill: finished steps: prune; left: distill, reflect (the step in flight is recorded "
        "as abandoned). Re-run the same command to finish: every step is idempotent and resumes what was half done"
    )
    now[0] = 4.0
    lines.finished({}, None)
    kept = [ln.rpartition("\x1b[K")[2] for ln in out.getvalue().split("\n")[:-1]]  # the lines left on the terminal
    assert kept == [
        "run-once: step 1/3: prune",
        "run-once: step 2/3: distill (prune took 1.5 s)",
        "run-once: done in 4.0 s (distill took 2.5 s)",
    ]
    quiet = cli_ops.StepLines(["prune"], Progress("run-once", "off", stream=out))
    assert quiet.before_step("prune") and out.getvalue().endswith("took 2.5 s)\n")
    assert quiet.interrupted_note().startswith("interrupted during prune: finished steps: none; left: prune ")
