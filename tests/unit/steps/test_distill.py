"""Distill: its pure decision on plain data, the whole step on the in-memory stores, and its journal."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from taskzilla_sleep.core.models import Episode, EpisodeStatus, Evidence, PatternKind, PatternStatus
from taskzilla_sleep.llm.base import PatternDraft, Unanswered
from taskzilla_sleep.night.steps import distill
from taskzilla_sleep.night.steps.base import NoUsableAnswers
from taskzilla_sleep.night.steps.distill import retry
from taskzilla_sleep.night.steps.distill.plan import to_journal
from taskzilla_sleep.rules.policies import pattern_id
from tests.unit.steps.conftest import DAY, NIGHT, TEAM, Fake, belief_of_all, episode, pattern, vector

RULES = [
    ("martin", "Keep pull requests small, under 300 changed lines."),
    ("sara", "Please keep pull requests small: under 300 changed lines."),
    ("joost", "Pull requests stay small, under 300 changed lines please."),
    ("priya", "Small pull requests only, under 300 changed lines."),
]
STATEMENT = "Pull requests are kept small, under 300 changed lines."


def rules(at: datetime = DAY) -> list[Episode]:
    """The rule, said by four people on two days (a belief is said on at least distill.min_days days)."""
    return [
        episode(f"r{i}", text, author, at=at, ts=at - timedelta(days=1 if i < 2 else 0))
        for i, (author, text) in enumerate(RULES)
    ]


def draft(statement: str, members: Sequence[Episode], **over: object) -> PatternDraft:
    base: dict[str, object] = {
        "statement": statement,
        "kind": PatternKind.NORM,
        "confidence": 0.9,
        "supporting_ids": tuple(e.id for e in members),
        "evidence": Evidence.EXPLICIT_RULE,
    }
    return PatternDraft.model_validate(base | over)


def inputs(
    members: Sequence[Episode], answer: tuple[PatternDraft, ...] | Unanswered, **over: object
) -> distill.DistillInputs:
    statements = () if isinstance(answer, Unanswered) else tuple(vector(d.statement) for d in answer)
    base: dict[str, object] = {
        "team": TEAM,
        "lookback": None,
        "episodes": tuple(members),
        "new_ids": frozenset(e.id for e in members),
        "people": frozenset(e.author.casefold() for e in members),
        "learnable": tuple(members),
        "live": {},
        "evidence": {},
        "entities": {},
        "episode_vectors": {e.id: vector(e.text) for e in members},
        "pattern_vectors": {},
        "fresh_groups": 1,
        "asked": (distill.AskedGroup(tuple(members), answer, statements),),
        "prompt_id": "test-distill",
    }
    return distill.DistillInputs(**(base | over))  # type: ignore[arg-type]


def test_decide_adds_a_belief_marks_the_night_and_scores_it_from_its_ledger(fake: Fake) -> None:
    members = rules()
    plan = distill.decide(inputs(members, (draft(STATEMENT, members),)), fake.settings, NIGHT)
    (change,) = plan.changes
    assert change.action == "add" and change.pattern.id == pattern_id(TEAM, [e.id for e in members])
    assert change.pattern.support_count == 4 and change.pattern.distinct_authors == 4
    assert change.pattern.status is PatternStatus.ACTIVE and change.pattern.prompt_id == "test-distill"
    assert sorted(change.absorb) == [e.id for e in members]  # each states the belief closely
    assert [m.id for m in plan.marks] == sorted(e.id for e in members)
    assert all(m.distilled_at == NIGHT for m in plan.marks)
    assert plan.counts()["patterns_added"] == 1 and plan.written_patterns() == [change.pattern]
    assert plan.pattern_lags() == [round((NIGHT - DAY).total_seconds(), 3)]


def test_decide_refuses_a_question_however_the_model_says_it(fake: Fake) -> None:
    members = rules()
    plan = distill.decide(inputs(members, (draft("Should pull requests be small?", members),)), fake.settings, NIGHT)
    assert plan.changes == [] and plan.seen.non_beliefs == 1


def test_decide_drops_support_that_disagrees_on_a_value(fake: Fake) -> None:
    members = [*rules(), episode("r9", "Keep pull requests under 800 changed lines.", "lea")]
    plan = distill.decide(inputs(members, (draft(STATEMENT, members),)), fake.settings, NIGHT)
    (change,) = plan.changes
    assert "ep-r9" not in change.pattern.evidence_ids and plan.seen.support_dropped == 1


def test_decide_bumps_the_belief_it_restates_instead_of_duplicating_it(fake: Fake) -> None:
    old = rules(at=DAY - timedelta(days=2))[:3]
    known = pattern("pat-prs", STATEMENT, old)
    new = [episode("r7", "Keep pull requests small please, under 300 changed lines.", "lea")]
    members = [*old, *new]
    got = inputs(
        members,
        (draft(STATEMENT, members),),
        live={known.id: known},
        evidence={e.id: e for e in old},
        pattern_vectors={known.id: vector(STATEMENT)},
        new_ids=frozenset({"ep-r7"}),
    )
    plan = distill.decide(got, fake.settings, NIGHT)
    (change,) = plan.changes
    assert change.action == "bump" and change.pattern.id == "pat-prs" and change.pattern.support_count == 4
    assert change.before == known and change.before_digest is not None


def test_a_statement_merely_alike_an_existing_one_is_a_pattern_of_its_own_for_reflect_to_weigh(fake: Fake) -> None:
    """Statements "... am 1." and "... am 15." barely move an embedding, and the slots read English only: a
    different belief is never an evidence bump of the old one, however similar it reads."""
    old_said = "Der monatliche Report ist am 1. des Monats fällig."
    new_said = "Der monatliche Report ist am 15. des Monats fällig."
    old = [episode(f"o{i}", old_said, a, at=DAY - timedelta(days=3 - i)) for i, a in enumerate(["ana", "ben", "cleo"])]
    new = [episode(f"n{i}", new_said, a, at=DAY - timedelta(days=1 - i)) for i, a in enumerate(["dev", "eli"])]
    new.append(episode("n2", new_said, "ana", at=DAY))
    known = pattern("pat-report", old_said, old)
    got = inputs(
        new,
        (draft(new_said, new),),
        live={known.id: known},
        evidence={e.id: e for e in old},
        pattern_vectors={known.id: vector(old_said)},
    )
    assert float(vector(old_said) @ vector(new_said)) > fake.settings.distill.match_threshold  # alike, not the same
    plan = distill.decide(got, fake.settings, NIGHT)
    added = [c for c in plan.changes if c.action == "add"]
    assert [c.pattern.statement for c in added] == [new_said] and "pat-report" not in {c.pattern.id for c in added}
    assert not [c for c in plan.changes if c.action == "bump"]


def test_decide_keeps_a_group_without_a_usable_answer_pending_and_fails_the_step(fake: Fake) -> None:
    members = rules()
    plan = distill.decide(inputs(members, Unanswered("not JSON")), fake.settings, NIGHT)
    assert plan.failure and "none of 1 group(s)" in plan.failure
    assert plan.seen.retry_groups == 1 and all(
        m.distill_attempts == 1 and "distilled_at" not in m.model_fields_set for m in plan.marks
    )


def test_decide_remembers_a_declined_group_on_its_episodes(fake: Fake) -> None:
    members = rules()
    plan = distill.decide(inputs(members, ()), fake.settings, NIGHT)
    assert plan.changes == [] and plan.seen.declined_groups == 1
    assert {m.declined_size for m in plan.marks} == {4}


def test_a_watchdog_distill_leaves_the_night_its_episodes_but_remembers_a_decline(fake: Fake) -> None:
    members = rules()
    plan = distill.decide(inputs(members, (), lookback=timedelta(hours=2)), fake.settings, NIGHT)
    assert [m.changes() for m in plan.marks] == [{"declined_size": 4}] * 4  # no distilled_at: the night reads them
    answered = distill.decide(
        inputs(members, (draft(STATEMENT, members),), lookback=timedelta(hours=2)), fake.settings, NIGHT
    )
    assert answered.marks == [] and len(answered.changes) == 1


def test_the_step_on_the_fake_writes_the_pattern_its_vector_the_marks_and_closes_the_journal(fake: Fake) -> None:
    fake.add(*rules(), episode("chat", "good morning all", "lea"))
    fake.llm.beliefs = belief_of_all(STATEMENT)
    ctx = fake.ctx()
    plan = distill.decide(distill.read(ctx), fake.settings, NIGHT)
    # The window is one topic; the greeting is shown too (the judge decides), and supports nothing.
    assert len(fake.llm.asked) == 1 and {e.id for e in fake.llm.asked[0].episodes} >= {f"ep-r{i}" for i in range(4)}
    counts = distill.write(ctx, plan)
    assert counts["patterns_added"] == 1 and counts["absorbed"] == 4
    (p,) = fake.graph.patterns(TEAM)
    assert p.statement == STATEMENT and fake.vectors.present(TEAM, "patterns") == {p.id}
    assert {e.status for e in fake.graph.get_episodes([f"ep-r{i}" for i in range(4)])} == {EpisodeStatus.ABSORBED}
    assert fake.graph.get_meta(distill.JOURNAL.format(team=TEAM)) == ""
    assert distill.last_distill(fake.graph, TEAM) == NIGHT
    # The next night finds nothing new: nothing is asked, nothing changes.
    again = distill.decide(distill.read(fake.ctx(NIGHT + timedelta(days=1))), fake.settings, NIGHT)
    assert len(fake.llm.asked) == 1 and again.changes == [] and again.marks == []


def test_a_journal_left_by_a_crash_is_finished_by_resume(fake: Fake) -> None:
    fake.add(*rules())
    fake.llm.beliefs = belief_of_all(STATEMENT)
    ctx = fake.ctx()
    plan = distill.decide(distill.read(ctx), fake.settings, NIGHT)
    fake.graph.set_meta(distill.JOURNAL.format(team=TEAM), json.dumps(to_journal(plan)))  # then the process died
    assert distill.resume(fake.ctx())["patterns_added"] == 1  # type: ignore[index]
    assert [p.statement for p in fake.graph.patterns(TEAM)] == [STATEMENT]
    assert distill.resume(fake.ctx()) is None  # finished: nothing left to resume


def test_a_journal_of_the_previous_format_is_read(fake: Fake) -> None:
    fake.add(*rules())
    legacy = {
        "team": TEAM,
        "now": NIGHT.isoformat(),
        "changes": [],
        "marks": [{"id": "ep-r0", "set": {"distilled_at": int(NIGHT.timestamp() * 1000), "declined_size": 3}}],
    }
    fake.graph.set_meta(distill.JOURNAL.format(team=TEAM), json.dumps(legacy))
    distill.resume(fake.ctx())
    (e,) = fake.graph.get_episodes(["ep-r0"])
    assert e.distilled_at == NIGHT and e.declined_size == 3


# -- issue 27 item 5: a model failure counts once per group per calendar night -----------------------


def _run(fake: Fake, at: datetime) -> None:
    """One distill at ``at`` (nightly: no lookback), written; a step with no usable answer fails."""
    ctx = fake.ctx(at)
    with contextlib.suppress(NoUsableAnswers):
        distill.write(ctx, distill.decide(distill.read(ctx), fake.settings, at))


def test_an_outage_counts_one_attempt_a_night_however_often_the_night_runs(fake: Fake) -> None:
    fake.add(*rules())
    fake.llm.beliefs = lambda r: Unanswered("the model is down")
    ids = [f"ep-r{i}" for i in range(len(RULES))]
    tries = fake.settings.distill.max_attempts
    for n in range(tries):
        night = NIGHT + timedelta(days=n)  # 03:05 in Amsterdam
        asked = len(fake.llm.asked)
        # The scheduled night, a rerun of it, a catch-up at noon and a watchdog pass over the whole
        # window at 17:00 (taking what the night deferred): four questions, one night.
        for at in (night, night + timedelta(minutes=1), night + timedelta(hours=9), night + timedelta(hours=14)):
            _run(fake, at)
        eps = fake.graph.get_episodes(ids)
        assert {e.distill_attempts for e in eps} == {n + 1}
        assert {e.distill_night for e in eps} == {night.astimezone(ZoneInfo("Europe/Amsterdam")).date().isoformat()}
        last = n + 1 == tries
        # Given up only once max_attempts distinct nights failed: then it is asked no more that night.
        assert all((e.distilled_at is not None) == last for e in eps)
        assert len(fake.llm.asked) - asked == (1 if last else 4)
    assert retry.given_up(fake.graph) == {TEAM: len(ids)}


def test_the_nights_are_told_apart_in_the_schedules_time_zone(fake: Fake) -> None:
    fake.add(*rules())
    fake.llm.beliefs = lambda r: Unanswered("the model is down")
    _run(fake, NIGHT)  # 03:05 on the 28th
    _run(fake, NIGHT + timedelta(hours=23, minutes=59))  # 03:04 on the 29th: still the night of the 28th
    assert {e.distill_attempts for e in fake.graph.get_episodes(["ep-r0"])} == {1}
    _run(fake, NIGHT + timedelta(days=1))  # 03:05 on the 29th: the next night
    assert {e.distill_attempts for e in fake.graph.get_episodes(["ep-r0"])} == {2}


def test_a_store_from_before_nights_were_kept_counts_the_next_failure_as_before(fake: Fake) -> None:
    fake.add(*[e.model_copy(update={"distill_attempts": 1}) for e in rules()])  # no distill_night stored
    members = rules()
    old = [e.model_copy(update={"distill_attempts": 1}) for e in members]
    plan = distill.decide(inputs(old, Unanswered("not JSON"), night="2026-11-28"), fake.settings, NIGHT)
    assert {(m.distill_attempts, m.distill_night) for m in plan.marks} == {(2, "2026-11-28")}


def test_a_rerun_of_a_counted_night_marks_nothing(fake: Fake) -> None:
    counted = [e.model_copy(update={"distill_attempts": 1, "distill_night": "2026-11-28"}) for e in rules()]
    plan = distill.decide(inputs(counted, Unanswered("not JSON"), night="2026-11-28"), fake.settings, NIGHT)
    assert plan.marks == [] and plan.seen.retry_groups == 1 and plan.seen.given_up_groups == 0


def test_a_group_answered_after_failed_nights_starts_afresh(fake: Fake) -> None:
    failed = [e.model_copy(update={"distill_attempts": 2, "distill_night": "2026-11-27"}) for e in rules()]
    plan = distill.decide(inputs(failed, (draft(STATEMENT, failed),), night="2026-11-28"), fake.settings, NIGHT)
    assert [m.changes() for m in plan.marks] == [
        {"distill_attempts": None, "distill_night": None, "distilled_at": NIGHT}
    ] * len(failed)


def test_an_episode_in_no_group_asked_forgets_its_failed_nights(fake: Fake) -> None:
    # Its group fell apart (or was declined before and nothing joined it): taken into account, and
    # never counted as given up.
    failed = [e.model_copy(update={"distill_attempts": 1, "distill_night": "2026-11-27"}) for e in rules()]
    plan = distill.decide(inputs(failed, (), asked=(), fresh_groups=0, night="2026-11-28"), fake.settings, NIGHT)
    assert {tuple(sorted(m.changes().items())) for m in plan.marks} == {
        (("distill_attempts", None), ("distill_night", None), ("distilled_at", NIGHT))
    }


def test_retry_releases_the_given_up_episodes_and_the_next_night_asks_again(fake: Fake) -> None:
    fake.add(*rules(), episode("other", "Deploys happen on Tuesdays only, never on Fridays.", "lea"))
    fake.llm.beliefs = lambda r: Unanswered("the model is down")
    tries = fake.settings.distill.max_attempts
    for n in range(tries):
        _run(fake, NIGHT + timedelta(days=n))
    given = fake.graph.given_up_episodes()
    assert given == {TEAM: sorted(e.id for e in fake.graph.episodes_by_status(TEAM, ["raw"]) if e.distill_attempts)}
    asked = len(fake.llm.asked)
    _run(fake, NIGHT + timedelta(days=tries))
    assert len(fake.llm.asked) == asked  # given up: not asked on its own any more

    assert retry.release_given_up(fake.graph, [TEAM]) == {TEAM: len(given[TEAM])}
    assert retry.given_up(fake.graph) == {}
    back = fake.graph.get_episodes(given[TEAM])
    assert {(e.distill_attempts, e.distill_night, e.distilled_at) for e in back} == {(0, None, None)}
    fake.llm.beliefs = belief_of_all(STATEMENT)  # the model is back
    _run(fake, NIGHT + timedelta(days=tries + 1))
    assert len(fake.llm.asked) == asked + 1
    assert [p.statement for p in fake.graph.patterns(TEAM)] == [STATEMENT]
    assert retry.release_given_up(fake.graph, [TEAM]) == {TEAM: 0}  # nothing left: a no-op


GERMAN = [
    ("martin", "Pull Requests bleiben bei uns immer klein, unter 300 geänderten Zeilen."),
    ("sara", "Pull Requests bleiben bei uns immer klein, unter 300 geänderten Zeilen bitte."),
    ("joost", "Bitte: Pull Requests bleiben bei uns immer klein, unter 300 geänderten Zeilen."),
    ("priya", "Pull Requests bleiben bei uns immer klein, unter 300 geänderten Zeilen, danke."),
]


def test_a_message_neither_the_gate_nor_the_embedder_reads_is_evidence_never_absorbed(fake: Fake) -> None:
    """An English embedder finds any two German texts close, and the gate reads English: nothing can
    tell that a German message states the belief, so it stays raw (decay never retires it). An
    embedder that declares no languages (litellm, chosen for the team) is taken at its word."""
    members = [
        episode(f"g{i}", text, author, ts=DAY - timedelta(days=1 if i < 2 else 0))
        for i, (author, text) in enumerate(GERMAN)
    ]
    answer = (draft("Pull Requests bleiben bei uns immer klein, unter 300 geänderten Zeilen.", members),)
    english = distill.decide(inputs(members, answer, embedder_reads=frozenset({"en"})), fake.settings, NIGHT)
    (change,) = english.changes
    assert change.action == "add" and sorted(change.pattern.evidence_ids) == sorted(e.id for e in members)
    assert change.absorb == []
    any_language = distill.decide(inputs(members, answer, embedder_reads=None), fake.settings, NIGHT)
    assert sorted(any_language.changes[0].absorb) == sorted(e.id for e in members)
