"""The offline provider with the real MiniLM embedder: deterministic, no network."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from taskzilla_sleep.core.models import PatternKind
from taskzilla_sleep.llm.base import (
    DistillRequest,
    EpisodeView,
    LLMUsage,
    PatternDraft,
    PatternView,
    ReflectRequest,
    validate_draft,
)
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.stores.ports import Embedder

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)

SMALL_PRS = [
    ("pr1", "martin", "human", "Please keep PRs small, under 300 changed lines, so reviews stay quick."),
    ("pr2", "sara", "human", "Can we split big pull requests into smaller ones? Small PRs get reviewed the same day."),
    (
        "pr3",
        "joost",
        "human",
        "Reminder for everyone: small, scoped pull requests please, big PRs sit in review for days.",
    ),
    ("pr4", "priya", "human", "Keep your PRs small and focused, one change per pull request."),
]
NOISE = [
    ("n1", "lena", "human", "looks good to me"),
    ("n2", "joost", "human", "+1 from me"),
    ("n3", "priya", "human", "thanks!"),
    ("n4", "martin", "human", "LGTM!"),
    ("n5", "sara", "human", "good morning all"),
]
STANDUP_ASYNC = "Standup is async: post your update in #standup before 10:00 (yesterday, today, blockers)."
STANDUP_VOICE = "From now on standup is a voice call at 09:30 instead of async posts."


@pytest.fixture
def provider(offline_embedder: Embedder) -> OfflineProvider:
    return OfflineProvider(offline_embedder)


def views(
    rows: Sequence[tuple[str, str, str, str]], step: timedelta = timedelta(days=1, minutes=7)
) -> tuple[EpisodeView, ...]:
    """Messages ``step`` apart (by default a day apart: the offline judgement wants several days)."""
    return tuple(
        EpisodeView(id=i, author=a, channel="dev", ts=T0 + n * step, text=t, provenance=p)
        for n, (i, a, p, t) in enumerate(rows)
    )


def request(
    rows: Sequence[tuple[str, str, str, str]], known: Sequence[str] = (), min_support: int = 3
) -> DistillRequest:
    return DistillRequest(
        team="platform",
        group_key="g1",
        episodes=views(rows),
        known_entities=tuple(known),
        min_support=min_support,
    )


def cosine(embedder: Embedder, a: str, b: str) -> float:
    va, vb = (np.asarray(v, dtype=np.float64) for v in embedder.embed([a, b]))
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def reflect(embedder: Embedder, new: str, old: str) -> ReflectRequest:
    return ReflectRequest(
        team="platform",
        new=PatternView(
            id="pat_new", statement=new, kind=PatternKind.PROCESS, first_seen=T0 + timedelta(days=3), support=3
        ),
        old=PatternView(id="pat_old", statement=old, kind=PatternKind.PROCESS, first_seen=T0, support=3),
        similarity=round(cosine(embedder, new, old), 4),
    )


def assert_usage_non_negative(usage: LLMUsage) -> None:
    for name, value in usage.as_dict().items():
        assert value is None or value >= 0, (name, value)


# -- distill ---------------------------------------------------------------------------------------


def test_paraphrases_by_different_people_become_one_valid_draft(provider: OfflineProvider) -> None:
    rows = [*SMALL_PRS, NOISE[0], NOISE[1]]
    req = request(rows, known=("martin", "sara", "joost", "priya", "lena", "dev"))
    ((draft,),) = provider.distill_many([req])
    assert isinstance(draft, PatternDraft)
    assert set(draft.supporting_ids) <= {e.id for e in req.episodes}
    # Its own grouping inside the topic: the closest paraphrases (the chatter is never evidence).
    assert {"pr2", "pr3", "pr4"} <= set(draft.supporting_ids) <= {"pr1", "pr2", "pr3", "pr4"}
    assert any(draft.statement in t for _, _, _, t in SMALL_PRS)  # a person's words (a question's cut off)
    assert 0.0 <= draft.confidence <= 1.0
    assert validate_draft(req, draft) is None
    assert not {"martin", "sara", "joost", "priya"} & set(draft.subjects)  # authors are not what it is about
    assert provider.usage.invalid_answers == 0
    assert_usage_non_negative(provider.usage)


def test_a_topic_holding_two_beliefs_gives_two_drafts_each_with_its_own_messages(provider: OfflineProvider) -> None:
    deploys = [
        ("d1", "lena", "human", "No production deploys on Fridays, please."),
        ("d2", "omar", "human", "Reminder: no production deploys on Fridays."),
        ("d3", "sara", "human", "We do no production deploys on Fridays."),
    ]
    req = request([*SMALL_PRS, *deploys, *NOISE])
    (drafts,) = provider.distill_many([req])
    assert len(drafts) == 2
    supports = sorted(set(d.supporting_ids) for d in drafts)
    assert {"d1", "d2", "d3"} in supports and any(s <= {"pr1", "pr2", "pr3", "pr4"} for s in supports)


def test_it_reads_english_only_and_leaves_the_rest_to_a_model(provider: OfflineProvider) -> None:
    german = [
        ("de1", "lena", "human", "Wir deployen nie am Freitag in die Produktion, das bleibt so."),
        ("de2", "omar", "human", "Freitags gibt es bei uns keine Deploys in die Produktion."),
        ("de3", "sara", "human", "Am Freitag deployen wir grundsätzlich nicht in die Produktion."),
    ]
    assert provider.languages == frozenset({"en"})
    assert provider.distill_many([request(german)]) == [()]


def test_subjects_come_from_the_known_entities_the_group_mentions(provider: OfflineProvider) -> None:
    rows = [
        ("g1", "martin", "human", "The billing-api deploys go out through the github pipeline only."),
        ("g2", "sara", "human", "Deploy billing-api only via the github pipeline, the one way we ship it."),
        ("g3", "joost", "human", "Only the github pipeline may deploy the billing-api to production."),
    ]
    req = request(rows, known=("billing-api", "github", "grafana", "martin", "sara", "joost"))
    ((draft,),) = provider.distill_many([req])
    assert draft is not None
    assert set(draft.subjects) == {"billing-api", "github"}
    assert validate_draft(req, draft) is None


def test_a_subject_must_be_mentioned_as_a_word_by_most_of_the_group(provider: OfflineProvider) -> None:
    rows = [
        ("s1", "martin", "human", "Keep pull requests small and specific, and CI must be green before review."),
        ("s2", "sara", "human", "Keep pull requests small and specific so reviewers can decide quickly."),
        ("s3", "joost", "human", "Keep every pull request small and specific, reviews go quicker."),
    ]
    ((draft,),) = provider.distill_many([request(rows, known=("ci", "martin", "sara", "joost"))])
    assert draft is not None
    assert "ci" not in draft.subjects  # one member of three names CI


def test_a_group_of_noise_gives_no_pattern(provider: OfflineProvider) -> None:
    assert provider.distill_many([request(NOISE)]) == [()]
    assert_usage_non_negative(provider.usage)


def test_fewer_substantive_episodes_than_min_support_give_no_pattern(provider: OfflineProvider) -> None:
    rows = [SMALL_PRS[0], SMALL_PRS[1], *NOISE]
    assert provider.distill_many([request(rows, min_support=3)]) == [()]
    assert provider.distill_many([request(SMALL_PRS, min_support=5)]) == [()]
    # Two people the same day: not what it stands behind (several people on several days).
    same_day = views([SMALL_PRS[1], SMALL_PRS[2], *NOISE], step=timedelta(minutes=5))
    req = DistillRequest(team="platform", group_key="g1", episodes=same_day, known_entities=(), min_support=2)
    assert provider.distill_many([req]) == [()]


def test_one_answer_per_request_in_order(provider: OfflineProvider) -> None:
    answers = provider.distill_many([request(NOISE), request(SMALL_PRS), request(SMALL_PRS[:2])])
    assert [len(a) for a in answers] == [0, 1, 0]
    assert provider.distill_many([]) == []


def test_long_statements_are_cut_to_the_limit(provider: OfflineProvider) -> None:
    tail = " and the reviewer should be able to read the whole change in one sitting" * 6
    rows = [(i, a, p, t + tail) for i, a, p, t in SMALL_PRS]
    ((draft,),) = provider.distill_many([request(rows)])
    assert draft is not None
    assert len(draft.statement) <= 300 and draft.statement.endswith("…")


def test_distill_is_deterministic(offline_embedder: Embedder) -> None:
    req = request([*SMALL_PRS, *NOISE], known=("dev", "martin"))
    first = OfflineProvider(offline_embedder).distill_many([req, request(NOISE)])
    second = OfflineProvider(offline_embedder).distill_many([req, request(NOISE)])
    assert first == second
    assert len(first[0]) == 1


# -- classify --------------------------------------------------------------------------------------


def test_a_change_statement_supersedes_the_habit_it_changes(
    provider: OfflineProvider, offline_embedder: Embedder
) -> None:
    (verdict,) = provider.classify_many([reflect(offline_embedder, STANDUP_VOICE, STANDUP_ASYNC)])
    assert verdict is not None and verdict.relation == "supersedes"
    (reverse,) = provider.classify_many([reflect(offline_embedder, STANDUP_ASYNC, STANDUP_VOICE)])
    assert reverse is not None and reverse.relation == "supersedes"


def test_two_near_identical_statements_are_the_same_belief(
    provider: OfflineProvider, offline_embedder: Embedder
) -> None:
    a = "No deploys to production on Fridays, we don't want weekend pages."
    b = "No deploys to production on Fridays; we do not want weekend pages."
    req = reflect(offline_embedder, a, b)
    assert req.similarity >= 0.92
    (verdict,) = provider.classify_many([req])
    assert verdict is not None and verdict.relation == "same"


def test_unrelated_statements_are_unrelated(provider: OfflineProvider, offline_embedder: Embedder) -> None:
    a = "Please keep PRs small, under 300 changed lines, so reviews stay quick."
    b = "The coffee machine on the third floor is broken again."
    (verdict,) = provider.classify_many([reflect(offline_embedder, a, b)])
    assert verdict is not None and verdict.relation == "unrelated"


def test_a_change_statement_about_something_else_is_not_a_contradiction(
    provider: OfflineProvider, offline_embedder: Embedder
) -> None:
    change = "From now on the coffee machine gets descaled every Monday instead of monthly."
    (verdict,) = provider.classify_many([reflect(offline_embedder, change, SMALL_PRS[0][3])])
    assert verdict is not None and verdict.relation == "unrelated"


def test_two_change_statements_alike_are_not_a_contradiction(
    provider: OfflineProvider, offline_embedder: Embedder
) -> None:
    other = "We switched to a voice call for standup at 09:30 instead of async posts."
    (verdict,) = provider.classify_many([reflect(offline_embedder, other, STANDUP_VOICE)])
    assert verdict is not None and verdict.relation not in ("contradicts", "supersedes")


@pytest.mark.parametrize(
    ("similarity", "relation"),
    [(0.99, "same"), (0.92, "same"), (0.80, "refines"), (0.75, "refines"), (0.65, "compatible"), (0.1, "unrelated")],
)
def test_plain_pairs_are_graded_by_similarity(provider: OfflineProvider, similarity: float, relation: str) -> None:
    req = ReflectRequest(
        team="platform",
        new=PatternView(id="b", statement="Keep PRs small.", kind=PatternKind.NORM, first_seen=T0, support=3),
        old=PatternView(id="a", statement="Small pull requests.", kind=PatternKind.NORM, first_seen=T0, support=3),
        similarity=similarity,
    )
    (verdict,) = provider.classify_many([req])
    assert verdict is not None and verdict.relation == relation and verdict.reason


def test_classify_is_deterministic_and_counters_stay_non_negative(offline_embedder: Embedder) -> None:
    reqs = [
        reflect(offline_embedder, STANDUP_VOICE, STANDUP_ASYNC),
        reflect(offline_embedder, SMALL_PRS[0][3], SMALL_PRS[3][3]),
        reflect(offline_embedder, SMALL_PRS[0][3], NOISE[0][3]),
    ]
    a, b = OfflineProvider(offline_embedder), OfflineProvider(offline_embedder)
    assert a.classify_many(reqs) == b.classify_many(reqs)
    assert a.classify_many(reqs) == a.classify_many(reqs)
    assert a.classify_many([]) == []
    assert_usage_non_negative(a.usage)
    assert a.usage.as_dict() == b.usage.as_dict()


def test_one_afternoon_is_a_belief_only_when_three_people_state_it(provider: OfflineProvider) -> None:
    def same_afternoon(rows: Sequence[tuple[str, str, str, str]]) -> DistillRequest:
        return DistillRequest(
            team="platform",
            group_key="g1",
            episodes=views(rows, step=timedelta(minutes=9)),
            known_entities=(),
            min_support=2,
        )

    # Two people in one thread: not the team's habit.
    assert provider.distill_many([same_afternoon(SMALL_PRS[:2])]) == [()]
    # Three people in their own words within the hour: a rule taught this morning (the watchdog's case).
    ((draft,),) = provider.distill_many([same_afternoon(SMALL_PRS[1:4])])
    assert isinstance(draft, PatternDraft) and set(draft.supporting_ids) == {"pr2", "pr3", "pr4"}
    # One person, however many days: a belief of the team needs more than one voice.
    alone = [(i, "martin", p, t) for i, _, p, t in SMALL_PRS]
    assert provider.distill_many([request(alone)]) == [()]
