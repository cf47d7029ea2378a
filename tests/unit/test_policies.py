"""The pure decisions in ``taskzilla_sleep.rules.policies``: no stores, no model, no clock."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskzilla_sleep.core.models import Episode, EpisodeStatus, Pattern, PatternKind, PatternStatus, Provenance
from taskzilla_sleep.rules.beliefs import Slots, slots, topics
from taskzilla_sleep.rules.policies import (
    Candidate,
    Ledger,
    Span,
    change_cues,
    contradiction_id,
    contradiction_kind,
    decay_eligible,
    distinct_texts,
    group_episodes,
    is_change_statement,
    is_learnable,
    is_stale,
    last_touched,
    ledger_confidence,
    main_channel,
    pattern_id,
    prune_eligible,
    slug,
    status_for,
    topic_for,
)

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
HABIT = "Please keep pull requests small and scoped to a single change."


def episode(
    eid: str = "ep1",
    text: str = HABIT,
    *,
    ts: datetime = T0,
    author: str = "martin",
    channel: str = "dev",
    provenance: Provenance = Provenance.HUMAN,
    **extra: Any,
) -> Episode:
    fields: dict[str, Any] = {
        "id": eid,
        "team": "platform",
        "channel": channel,
        "author": author,
        "text": text,
        "ts": ts,
        "provenance": provenance,
        "ingested_at": ts,
    }
    fields.update(extra)
    return Episode(**fields)


def pattern(pid: str = "pat_1", **extra: Any) -> Pattern:
    fields: dict[str, Any] = {
        "id": pid,
        "team": "platform",
        "statement": HABIT,
        "kind": PatternKind.NORM,
        "status": PatternStatus.ACTIVE,
        "confidence": 0.9,
        "first_seen": T0,
        "last_seen": T0,
        "created_at": T0,
        "updated_at": T0,
        "valid_from": T0,
    }
    fields.update(extra)
    return Pattern(**fields)


# -- is_learnable ----------------------------------------------------------------------------------


def test_a_real_human_statement_is_learnable() -> None:
    assert is_learnable(episode(text=HABIT))


@pytest.mark.parametrize("provenance", [Provenance.HUMAN, Provenance.BOT, Provenance.IMPORT])
def test_human_bot_and_import_provenance_are_learnable(provenance: Provenance) -> None:
    assert is_learnable(episode(provenance=provenance))


def test_the_bots_own_drafts_are_never_learned_from() -> None:
    assert not is_learnable(episode(text=HABIT, provenance=Provenance.AI_DRAFT))


@pytest.mark.parametrize(
    "text", ["looks good", "+1", "thanks!", "LGTM!", "+1 from me", "looks good to me", "good morning all", "ok"]
)
def test_chatter_is_never_learnable(text: str) -> None:
    assert not is_learnable(episode(text=text))


@pytest.mark.parametrize("status", [EpisodeStatus.ABSORBED, EpisodeStatus.RETIRED, EpisodeStatus.PRUNED])
def test_only_raw_episodes_are_learnable(status: EpisodeStatus) -> None:
    assert not is_learnable(episode(status=status))


def test_pinned_episodes_are_not_learnable() -> None:
    assert not is_learnable(episode(pinned=True))


# -- change cues -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("We no longer deploy on Fridays.", "no longer"),
        ("From now on standup is a voice call at 09:30.", "from now on"),
        ("Use pnpm instead of npm for the frontend.", "instead of"),
        ("We are not doing async standups anymore.", "not doing async standups anymore"),
        ("We switched to GitHub Actions last week.", "switched to"),
    ],
)
def test_the_five_seed_cues_are_change_statements(text: str, cue: str) -> None:
    cues = change_cues(text)
    assert [c.casefold() for c in cues] == [cue]
    assert is_change_statement(text)


def test_cues_are_matched_case_insensitively() -> None:
    assert is_change_statement("FROM NOW ON we review in pairs.")
    assert change_cues("No Longer needed") == ["No Longer"]


@pytest.mark.parametrize(
    "text",
    [
        HABIT,
        "Standup is async: post your update before 10:00.",
        "Let's do it that way instead.",
        "The switch in the server room is broken.",
        "It is not ready yet, ask again tomorrow.",
        "Anymore questions about the release?",
        "",
    ],
)
def test_plain_statements_are_not_change_statements(text: str) -> None:
    assert change_cues(text) == []
    assert not is_change_statement(text)


def test_not_anymore_only_within_one_sentence() -> None:
    assert not is_change_statement("It is not broken. Does anyone use the old runner anymore?")


def test_contracted_not_anymore_is_a_change_statement() -> None:
    assert is_change_statement("We don't deploy on Fridays anymore.")


# -- distinct_texts --------------------------------------------------------------------------------


def test_identical_reminders_count_once_and_the_earliest_is_kept() -> None:
    reminder = "Reminder: standup updates are due in 10 minutes."
    eps = [
        episode("r3", reminder, ts=T0 + timedelta(days=2), author="taskzilla", provenance=Provenance.BOT),
        episode("r1", reminder, ts=T0, author="taskzilla", provenance=Provenance.BOT),
        episode("h1", HABIT, ts=T0 + timedelta(hours=1)),
        episode("r2", reminder, ts=T0 + timedelta(days=1), author="taskzilla", provenance=Provenance.BOT),
    ]
    out = distinct_texts(eps)
    assert [e.id for e in out] == ["r1", "h1"]


def test_the_same_words_with_another_number_are_another_statement() -> None:
    a = episode("a", "The gateway timeout is 30 seconds.", ts=T0)
    b = episode("b", "the gateway timeout is 60 seconds", ts=T0 + timedelta(hours=1))
    same = episode("c", "The gateway timeout is 30 seconds!", ts=T0 + timedelta(hours=2))
    assert [e.id for e in distinct_texts([a, b, same])] == ["a", "b"]  # case and punctuation do not count


def test_texts_differing_only_in_case_spacing_and_chatter_are_one_piece_of_evidence() -> None:
    eps = [
        episode("b", "ok, keep pull requests small please", ts=T0 + timedelta(minutes=5)),
        episode("a", "Keep  pull requests SMALL please", ts=T0),
    ]
    assert [e.id for e in distinct_texts(eps)] == ["a"]


def test_different_texts_are_all_kept_in_time_order() -> None:
    eps = [episode("b", "Deploy freeze on Fridays, always.", ts=T0 + timedelta(hours=1)), episode("a", HABIT)]
    assert [e.id for e in distinct_texts(eps)] == ["a", "b"]


def test_equal_timestamps_break_ties_by_id() -> None:
    eps = [episode("z", HABIT), episode("m", HABIT)]
    assert [e.id for e in distinct_texts(eps)] == ["m"]


# -- group_episodes --------------------------------------------------------------------------------


def unit(degrees: float, z: float = 0.0) -> list[float]:
    """A unit vector in the xy plane at ``degrees`` from the x axis (z tilts it out of the plane)."""
    r = math.radians(degrees)
    v = [math.cos(r), math.sin(r), z]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def cand(
    eid: str, vector: Sequence[float], text: str = HABIT, minutes: int = 0, entities: Sequence[str] = ()
) -> Candidate:
    return Candidate(episode(eid, text, ts=T0 + timedelta(minutes=minutes)), list(vector), frozenset(entities))


def ids_of(groups: Sequence[Any]) -> list[list[str]]:
    return sorted(sorted(g.ids) for g in groups)


def test_similar_vectors_group_and_dissimilar_ones_do_not() -> None:
    cands = [
        cand("a1", unit(0), minutes=0),
        cand("a2", unit(10), minutes=1),
        cand("a3", unit(-10), minutes=2),
        cand("b1", unit(90), minutes=3),
        cand("b2", unit(100), minutes=4),
        cand("b3", unit(80), minutes=5),
        cand("c1", [0.0, 0.0, 1.0], minutes=6),
    ]
    groups = group_episodes(cands, similarity_threshold=0.6, min_size=3)
    assert ids_of(groups) == [["a1", "a2", "a3"], ["b1", "b2", "b3"]]


def test_groups_smaller_than_min_size_are_dropped() -> None:
    cands = [cand("a1", unit(0)), cand("a2", unit(5), minutes=1), cand("b1", unit(90), minutes=2)]
    assert group_episodes(cands, 0.6, min_size=3) == []
    assert ids_of(group_episodes(cands, 0.6, min_size=2)) == [["a1", "a2"]]
    assert ids_of(group_episodes(cands, 0.6, min_size=1)) == [["a1", "a2"], ["b1"]]


def test_change_statements_never_share_a_group_with_plain_ones() -> None:
    change = "From now on pull requests stay small and scoped to one change."
    cands = [
        cand("p1", unit(0), minutes=0),
        cand("c1", unit(0), change, minutes=1),
        cand("p2", unit(1), minutes=2),
        cand("c2", unit(1), change, minutes=3),
        cand("p3", unit(2), minutes=4),
        cand("c3", unit(2), change, minutes=5),
    ]
    groups = group_episodes(cands, similarity_threshold=0.5, min_size=3)
    assert ids_of(groups) == [["c1", "c2", "c3"], ["p1", "p2", "p3"]]
    for g in groups:
        assert len({is_change_statement(c.episode.text) for c in g.members}) == 1


def test_a_shared_entity_tips_a_borderline_pair_over_the_threshold() -> None:
    angle = math.degrees(math.acos(0.55))  # cosine 0.55: below 0.60 alone, 0.63 with the 0.08 bonus
    plain = [cand("a", unit(0)), cand("b", unit(angle), minutes=1)]
    assert group_episodes(plain, similarity_threshold=0.6, min_size=2) == []
    shared = [cand("a", unit(0), entities=["billing-api"]), cand("b", unit(angle), minutes=1, entities=["billing-api"])]
    assert ids_of(group_episodes(shared, similarity_threshold=0.6, min_size=2)) == [["a", "b"]]
    other = [cand("a", unit(0), entities=["billing-api"]), cand("b", unit(angle), minutes=1, entities=["github"])]
    assert group_episodes(other, similarity_threshold=0.6, min_size=2) == []
    assert ids_of(group_episodes(shared, similarity_threshold=0.6, entity_bonus=0.0, min_size=2)) == []


def test_a_rare_topic_word_shared_brings_paraphrases_together() -> None:
    angle = math.degrees(math.acos(0.5))  # cosine 0.50: below 0.55 alone
    texts = ["Timesheets are due every Friday by 4pm", "Please get your timesheet in before the weekend"]
    pair = [
        Candidate(episode(f"t{i}", t, ts=T0 + timedelta(minutes=i)), unit(a), frozenset(), slots(t), topics(t))
        for i, (t, a) in enumerate(zip(texts, (0.0, angle), strict=True))
    ]
    assert group_episodes(pair, 0.55, min_size=2) == []
    assert ids_of(group_episodes(pair, 0.55, min_size=2, topic_bonus=0.06)) == [["t0", "t1"]]
    # a word every statement of the window uses says nothing about which belief it is
    common = [
        *pair,
        *(
            Candidate(
                episode(f"x{i}", f"timesheet tool note {i}", ts=T0 + timedelta(hours=i)),
                unit(90 + 5 * i),
                frozenset(),
                Slots(),
                topics("timesheet"),
            )
            for i in range(1, 40)
        ),
    ]
    assert "t0" not in {i for g in group_episodes(common, 0.55, min_size=2, topic_bonus=0.06) for i in g.ids}


def test_the_same_value_brings_two_wordings_together_and_another_value_never_does() -> None:
    angle = math.degrees(math.acos(0.45))

    def two(a: str, b: str) -> list[Candidate]:
        return [
            Candidate(episode(f"s{i}", t, ts=T0 + timedelta(minutes=i)), unit(x), frozenset(), slots(t), topics(t))
            for i, (t, x) in enumerate(((a, 0.0), (b, angle)))
        ]

    same = two("Customers get 3 reminders before a ticket auto-closes", "the flow is 3 reminders, then close")
    assert ids_of(group_episodes(same, 0.55, min_size=2, value_bonus=0.15)) == [["s0", "s1"]]
    other = two("Customers get 3 reminders before a ticket auto-closes", "the flow is 2 reminders, then close")
    assert group_episodes(other, 0.55, min_size=2, value_bonus=0.15) == []
    # one time of day, said about two different things: two beliefs
    unrelated = two("Standup updates go in the channel before 10:00", "On-call handoff is on Monday at 10:00 in ops")
    assert group_episodes(unrelated, 0.55, min_size=2, value_bonus=0.15) == []


def test_a_change_statement_finds_its_group_behind_many_closer_plain_groups() -> None:
    dim = 40

    def vec(**axes: float) -> list[float]:
        v = [0.0] * dim
        for k, x in axes.items():
            v[int(k[1:])] = x
        return v

    change = "From now on deploys need two approvals instead of one."
    cands = [
        cand("c1", vec(a0=0.7, a33=math.sqrt(1 - 0.49)), change, minutes=0),
        cand("c2", vec(a0=0.7, a33=math.sqrt(1 - 0.49)), change, minutes=1),
        # 32 plain singletons, each 0.75 from the last change statement and 0.56 from one another
        *(cand(f"p{k:02d}", vec(a0=0.75, **{f"a{k + 1}": math.sqrt(1 - 0.5625)}), minutes=2 + k) for k in range(32)),
        cand("c3", vec(a0=1.0), change, minutes=100),  # cosine 0.70 to the change group: clears 0.60
    ]
    groups = group_episodes(cands, similarity_threshold=0.6, min_size=3)
    assert ids_of(groups) == [["c1", "c2", "c3"]]


def test_vector_length_does_not_matter() -> None:
    cands = [cand("a", [3.0, 0.0, 0.0]), cand("b", [0.0, 0.2, 0.0], minutes=1), cand("c", [0.5, 0.01, 0.0], minutes=2)]
    assert ids_of(group_episodes(cands, 0.9, min_size=1)) == [["a", "c"], ["b"]]


def test_grouping_does_not_depend_on_input_order() -> None:
    rng = random.Random(7)
    cands = [
        cand(f"e{i:02d}", unit(rng.uniform(-80, 80), rng.uniform(-0.3, 0.3)), minutes=i // 2, entities=[f"t{i % 3}"])
        for i in range(30)
    ]
    expected = [(g.key, g.ids) for g in group_episodes(cands, 0.8, min_size=2)]
    assert expected  # the sample does form groups
    for _ in range(5):
        shuffled = list(cands)
        rng.shuffle(shuffled)
        assert [(g.key, g.ids) for g in group_episodes(shuffled, 0.8, min_size=2)] == expected


def test_group_members_are_in_time_order_and_the_key_is_order_free() -> None:
    cands = [cand("late", unit(2), minutes=9), cand("early", unit(0)), cand("mid", unit(1), minutes=4)]
    (g,) = group_episodes(cands, 0.9, min_size=3)
    assert g.ids == ["early", "mid", "late"]
    (g2,) = group_episodes(list(reversed(cands)), 0.9, min_size=3)
    assert g.key == g2.key


# -- confidence from the ledger --------------------------------------------------------------------


def led(support: int = 3, counter: int = 0, authors: int = 3, channels: int = 1, llm: float | None = None) -> Ledger:
    return Ledger(support=support, counter=counter, authors=authors, channels=channels, llm_confidence=llm)


def test_confidence_is_zero_without_support() -> None:
    assert ledger_confidence(led(support=0)) == 0.0
    assert ledger_confidence(led(support=0, llm=1.0)) == 0.0
    assert ledger_confidence(led(support=-2, llm=0.9)) == 0.0


@pytest.mark.parametrize("llm", [None, 0.0, 0.5, 1.0])
def test_confidence_grows_with_support(llm: float | None) -> None:
    values = [ledger_confidence(led(support=n, llm=llm)) for n in range(1, 40)]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))
    assert values[0] < values[-1]


def test_the_documented_ledger_points() -> None:
    assert ledger_confidence(led(support=3)) == 0.75
    assert ledger_confidence(led(support=5)) == pytest.approx(0.8333, abs=1e-4)
    assert ledger_confidence(led(support=9)) == 0.9


@pytest.mark.parametrize("llm", [None, 0.7, 1.0])
def test_one_author_is_weaker_evidence_than_several(llm: float | None) -> None:
    alone = ledger_confidence(led(support=5, authors=1, llm=llm))
    assert alone < ledger_confidence(led(support=5, authors=2, llm=llm))
    assert ledger_confidence(led(support=5, authors=2, llm=llm)) == ledger_confidence(
        led(support=5, authors=4, llm=llm)
    )


@pytest.mark.parametrize("llm", [None, 0.9])
def test_counter_evidence_lowers_confidence(llm: float | None) -> None:
    values = [ledger_confidence(led(support=6, counter=c, llm=llm)) for c in range(5)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))


def test_the_models_confidence_is_averaged_in() -> None:
    base = ledger_confidence(led(support=3))
    assert base == 0.75
    assert ledger_confidence(led(support=3, llm=0.95)) == pytest.approx(0.5 * 0.75 + 0.5 * 0.95, abs=1e-4)
    assert ledger_confidence(led(support=3, llm=0.2)) < base < ledger_confidence(led(support=3, llm=1.0))


def test_confidence_is_bounded() -> None:
    grid = itertools.product([1, 2, 3, 10, 1000], [0, 1, 50], [0, 1, 5], [0, 1, 9], [None, 0.0, 1.0])
    for support, counter, authors, channels, llm in grid:
        value = ledger_confidence(led(support, counter, authors, channels, llm))
        assert 0.0 <= value <= 1.0, (support, counter, authors, channels, llm, value)


# -- status_for ------------------------------------------------------------------------------------


@pytest.mark.parametrize("current", [PatternStatus.TENTATIVE, PatternStatus.ACTIVE])
def test_status_follows_the_floor(current: PatternStatus) -> None:
    assert status_for(0.80, 0.80, current) is PatternStatus.ACTIVE
    assert status_for(0.95, 0.80, current) is PatternStatus.ACTIVE
    assert status_for(0.7999, 0.80, current) is PatternStatus.TENTATIVE
    assert status_for(0.0, 0.80, current) is PatternStatus.TENTATIVE


@pytest.mark.parametrize("current", [PatternStatus.CONTESTED, PatternStatus.SUPERSEDED, PatternStatus.RETIRED])
@pytest.mark.parametrize("confidence", [0.0, 0.5, 0.8, 1.0])
def test_contested_superseded_and_retired_are_never_changed(current: PatternStatus, confidence: float) -> None:
    assert status_for(confidence, 0.80, current) is current


# -- ids -------------------------------------------------------------------------------------------


def test_pattern_id_is_deterministic_and_order_independent() -> None:
    a = pattern_id("platform", ["ep_b", "ep_a", "ep_c"])
    assert a == pattern_id("platform", ["ep_c", "ep_a", "ep_b"]) == pattern_id("platform", ["ep_a", "ep_b", "ep_c"])
    assert a.startswith("pat_") and len(a) == 24
    assert a != pattern_id("billing", ["ep_a", "ep_b", "ep_c"])
    assert a != pattern_id("platform", ["ep_a", "ep_b"])
    assert a != pattern_id("platform", ["ep_a", "ep_b", "ep_d"])


def test_contradiction_id_is_deterministic_and_order_independent() -> None:
    c = contradiction_id("platform", "pat_old", "pat_new")
    assert c == contradiction_id("platform", "pat_new", "pat_old")
    assert c.startswith("con_") and len(c) == 20
    assert c != contradiction_id("billing", "pat_old", "pat_new")
    assert c != contradiction_id("platform", "pat_old", "pat_other")


# -- prune eligibility -----------------------------------------------------------------------------

NOW = datetime(2026, 12, 30, 3, 5, tzinfo=UTC)
STALE = timedelta(days=30)


def prune_args(**over: Any) -> dict[str, Any]:
    old = NOW - timedelta(days=31)
    args: dict[str, Any] = {
        "ep": episode("old", ts=old, ingested_at=old),
        "now": NOW,
        "stale_after": STALE,
        "is_evidence": False,
        "best_similarity": 0.30,
        "match_threshold": 0.55,
    }
    args.update(over)
    return args


def test_a_stale_unmatched_raw_episode_is_prunable() -> None:
    assert prune_eligible(**prune_args())


@pytest.mark.parametrize(
    "change",
    [
        {"ep": episode("fresh", ts=NOW - timedelta(days=29), ingested_at=NOW - timedelta(days=29))},
        {"ep": episode("read", ts=NOW - timedelta(days=40), ingested_at=NOW - timedelta(days=40),
                       last_accessed=NOW - timedelta(days=2))},
        {"ep": episode("late-ingest", ts=NOW - timedelta(days=40), ingested_at=NOW - timedelta(days=1))},
        {"ep": episode("absorbed", ts=NOW - timedelta(days=40), ingested_at=NOW - timedelta(days=40),
                       status=EpisodeStatus.ABSORBED)},
        {"ep": episode("pinned", ts=NOW - timedelta(days=40), ingested_at=NOW - timedelta(days=40), pinned=True)},
        {"is_evidence": True},
        {"best_similarity": 0.55},
        {"best_similarity": 0.9},
    ],
    ids=["untouched-29-days", "read-recently", "ingested-recently", "absorbed", "pinned", "evidence",
         "similarity-at-threshold", "similar"],
)  # fmt: skip
def test_each_prune_condition_alone_keeps_the_episode(change: dict[str, Any]) -> None:
    assert not prune_eligible(**prune_args(**change))


def test_prune_boundary_is_inclusive_on_staleness() -> None:
    exactly = NOW - STALE
    assert prune_eligible(**prune_args(ep=episode("x", ts=exactly, ingested_at=exactly)))
    just_after = exactly + timedelta(seconds=1)
    assert not prune_eligible(**prune_args(ep=episode("y", ts=exactly, ingested_at=just_after)))


def test_last_touched_is_the_latest_of_ts_ingestion_and_access() -> None:
    e = episode(ts=T0, ingested_at=T0 + timedelta(days=1), last_accessed=T0 + timedelta(days=3))
    assert last_touched(e) == T0 + timedelta(days=3)
    assert last_touched(episode(ts=T0 + timedelta(days=2), ingested_at=T0)) == T0 + timedelta(days=2)


# -- decay eligibility -----------------------------------------------------------------------------

GRACE = timedelta(hours=72)


def absorbed(hours_ago: float = 73, **over: Any) -> Episode:
    fields: dict[str, Any] = {
        "status": EpisodeStatus.ABSORBED,
        "schema_absorbed": 1,
        "absorbed_at": NOW - timedelta(hours=hours_ago),
        "absorbed_by": "pat_1",
    }
    fields.update(over)
    return episode("abs", ts=NOW - timedelta(days=5), **fields)


def test_an_absorbed_episode_past_the_grace_under_a_strong_pattern_decays() -> None:
    assert decay_eligible(absorbed(73), pattern(confidence=0.80), NOW, GRACE, 0.80)
    assert decay_eligible(absorbed(72), pattern(confidence=0.80), NOW, GRACE, 0.80)  # exactly the grace


@pytest.mark.parametrize(
    ("ep", "pat"),
    [
        (absorbed(71), pattern()),
        (absorbed(71.99), pattern()),
        (absorbed(73), pattern(status=PatternStatus.CONTESTED)),
        (absorbed(73), pattern(status=PatternStatus.TENTATIVE)),
        (absorbed(73), pattern(status=PatternStatus.SUPERSEDED)),
        (absorbed(73), pattern(status=PatternStatus.RETIRED)),
        (absorbed(73), pattern(confidence=0.79)),
        (absorbed(73), None),
        (absorbed(73, pinned=True), pattern()),
        (absorbed(73, status=EpisodeStatus.RAW), pattern()),
        (absorbed(73, schema_absorbed=0), pattern()),
        (absorbed(73, absorbed_at=None), pattern()),
        (absorbed(73, status=EpisodeStatus.RETIRED), pattern()),
    ],
    ids=["grace-71h", "grace-71.99h", "contested", "tentative", "superseded", "retired-pattern", "confidence-0.79",
         "no-pattern", "pinned", "raw", "schema-absorbed-0", "no-absorbed-at", "already-retired"],
)  # fmt: skip
def test_each_decay_condition_alone_keeps_the_episode(ep: Episode, pat: Pattern | None) -> None:
    assert not decay_eligible(ep, pat, NOW, GRACE, 0.80)


# -- stale -----------------------------------------------------------------------------------------


def test_an_active_pattern_not_seen_for_longer_than_the_window_is_stale() -> None:
    window = timedelta(days=90)
    assert is_stale(pattern(last_seen=NOW - timedelta(days=91)), NOW, window)
    assert is_stale(pattern(last_seen=NOW - timedelta(days=90)), NOW, window)
    assert not is_stale(pattern(last_seen=NOW - timedelta(days=89)), NOW, window)


@pytest.mark.parametrize(
    "status", [PatternStatus.TENTATIVE, PatternStatus.CONTESTED, PatternStatus.SUPERSEDED, PatternStatus.RETIRED]
)
def test_only_active_patterns_are_stale(status: PatternStatus) -> None:
    assert not is_stale(pattern(status=status, last_seen=NOW - timedelta(days=400)), NOW, timedelta(days=90))


def test_pinned_facts_are_never_stale() -> None:
    fact = pattern(pinned=True, kind=PatternKind.FACT, confidence=1.0, last_seen=NOW - timedelta(days=400))
    assert not is_stale(fact, NOW, timedelta(days=90))


# -- topics and slugs ------------------------------------------------------------------------------


def test_topic_is_the_first_project_tool_or_tag_subject() -> None:
    kinds = {"martin": "person", "Billing API": "project", "github": "tool", "deploys": "topic"}
    assert topic_for(["martin", "Billing API", "github"], kinds, "#ops", "norm") == "billing-api"
    assert topic_for(["martin", "github"], kinds, "#ops", "norm") == "github"
    assert topic_for(["#deploys"], {"#deploys": "topic"}, "ops", "norm") == "deploys"


def test_main_channel_is_the_most_used_and_a_tie_goes_to_the_first_to_speak() -> None:
    assert main_channel(["dev", "ops", "ops"]) == "ops"
    # Both orders of the same tie: a rule that followed set order would get one of them wrong.
    assert main_channel(["ops", "dev", "dev", "ops"]) == "ops"
    assert main_channel(["dev", "ops", "ops", "dev"]) == "dev"
    assert main_channel([]) == ""


def test_topic_falls_back_to_the_channel_then_the_kind() -> None:
    kinds = {"martin": "person", "dev": "channel"}
    assert topic_for(["martin", "dev"], kinds, "#On-Call Ops", "process") == "on-call-ops"
    assert topic_for([], {}, "", "preference") == "preference"
    assert topic_for(["unknown"], {}, "", "fact") == "fact"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("#Billing API", "billing-api"),
        ("@lena", "lena"),
        ("  CI / CD  pipeline ", "ci-cd-pipeline"),
        ("!!!", "general"),
        ("", "general"),
        ("x" * 60, "x" * 40),
    ],
)
def test_slug(name: str, expected: str) -> None:
    assert slug(name) == expected


def test_slugs_are_file_name_safe_and_short() -> None:
    for name in ["../../etc/passwd", "a/b\\c", "Tab\tand\nnewline", "#" * 10, "x" * 500]:
        s = slug(name)
        assert 0 < len(s) <= 40
        assert set(s) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
        assert not s.startswith("-")


def test_a_truncated_slug_does_not_end_with_a_hyphen() -> None:
    assert not slug("a" * 39 + " deploy").endswith("-")


# -- contradiction kinds ---------------------------------------------------------------------------


def _span(first_day: int, last_day: int, *authors: str) -> Span:
    at = datetime(2026, 11, 1, 9, tzinfo=UTC)
    return Span(at + timedelta(days=first_day), at + timedelta(days=last_day), dict.fromkeys(authors, 1))


@pytest.mark.parametrize(
    ("relation", "old", "new", "kind"),
    [
        # Later, and some of the same people: the team changed its practice.
        ("contradicts", _span(0, 5, "martin", "priya"), _span(6, 8, "martin", "sara"), "update"),
        # Later, a change announced (the provider's word), by other people: still a change.
        ("supersedes", _span(0, 5, "martin"), _span(6, 8, "sara"), "update"),
        # Later, other people, no change announced: people disagree.
        ("contradicts", _span(0, 5, "martin"), _span(6, 8, "sara"), "disagreement"),
        # Overlapping in time: both are meant to hold now, whatever the provider said.
        ("supersedes", _span(0, 7, "martin"), _span(6, 8, "martin"), "disagreement"),
        ("contradicts", _span(0, 6, "martin"), _span(6, 8, "martin"), "disagreement"),
    ],
)
def test_the_kind_of_a_contradiction_follows_the_dates_and_the_people(
    relation: str, old: Span, new: Span, kind: str
) -> None:
    assert contradiction_kind(relation, old, new).value == kind


def test_only_a_conflict_has_a_kind() -> None:
    with pytest.raises(ValueError, match="not a contradiction"):
        contradiction_kind("compatible", _span(0, 1, "a"), _span(2, 3, "a"))


def test_a_span_counts_people_not_bots() -> None:
    at = datetime(2026, 11, 1, 9, tzinfo=UTC)

    def ep(i: int, author: str, day: int, prov: Provenance = Provenance.HUMAN) -> Episode:
        return Episode(
            id=f"e{i}", team="t", channel="c", author=author, text="x", ts=at + timedelta(days=day),
            provenance=prov, ingested_at=at,
        )  # fmt: skip

    eps = [ep(1, "Martin", 0), ep(2, "sara", 2), ep(3, "reminder-bot", 9, Provenance.BOT), ep(4, "martin", 3)]
    p = Pattern(
        id="p", team="t", statement="s", kind=PatternKind.NORM, confidence=0.8, evidence_ids=["e1", "e2", "e3", "e4"],
        first_seen=at, last_seen=at + timedelta(days=9), created_at=at, updated_at=at, valid_from=at,
    )  # fmt: skip
    span = Span.of(p, eps)
    # The bot's reminder on day 9 does not keep the old rule alive past a change on day 5.
    assert span.last == at + timedelta(days=3) and span.authors == {"martin": 2, "sara": 1}
