"""Prune: its pure decision on plain data, and the whole step on the in-memory stores."""

from __future__ import annotations

from datetime import timedelta

from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.night.steps import prune
from tests.unit.steps.conftest import DAY, NIGHT, TEAM, Fake, episode, pattern, vector

OLD = DAY - timedelta(days=30)


def inputs(**over: object) -> prune.PruneInputs:
    stale = (episode("old-1", "lunch at the canteen"), episode("old-2", "we deploy with the release train"))
    base: dict[str, object] = {
        "team": TEAM,
        "examined": 5,
        "stale": stale,
        "episode_vectors": {e.id: vector(e.text) for e in stale},
        "pattern_vectors": {"pat-1": vector("we deploy with the release train")},
        "vectors_present": {"episodes": frozenset({"old-1", "old-2", "gone"}), "patterns": frozenset({"pat-1", "p-x"})},
        "live": {"episodes": frozenset({"old-1", "old-2"}), "patterns": frozenset({"pat-1"})},
    }
    return prune.PruneInputs(**(base | over))  # type: ignore[arg-type]


def test_decide_prunes_what_matches_no_active_pattern_and_drops_orphan_vectors(fake: Fake) -> None:
    stale = [
        episode(i, t, at=OLD)
        for i, t in (("old-1", "lunch at the canteen"), ("old-2", "we deploy with the release train"))
    ]
    plan = prune.decide(inputs(stale=tuple(stale)), fake.settings, NIGHT)
    assert [e.id for e in plan.prune] == ["ep-old-1"]  # the other one is as close as a belief: kept
    assert plan.orphan_vectors == {"episodes": ["gone"], "patterns": ["p-x"]}
    assert plan.counts() == {"examined": 5, "pruned": 1, "orphan_vectors": 2}
    assert not plan.empty() and any("prune ep-old-1" in line for line in plan.lines())


def test_decide_keeps_what_was_touched_recently(fake: Fake) -> None:
    fresh = episode("new", "lunch at the canteen", at=OLD, last_accessed=NIGHT - timedelta(days=1))
    plan = prune.decide(inputs(stale=(fresh,), episode_vectors={}, pattern_vectors={}), fake.settings, NIGHT)
    assert plan.prune == []


def test_the_step_on_the_fake_prunes_the_stale_and_keeps_the_evidence(fake: Fake) -> None:
    lunch = episode("lunch", "lunch at the canteen", at=OLD)
    rule = episode("rule", "no deploys on fridays", at=OLD)
    recent = episode("recent", "lunch at the canteen again", at=NIGHT - timedelta(days=1))
    fake.add(lunch, rule, recent)
    fake.add_pattern(pattern("pat-friday", "No deploys on Fridays.", [rule]))
    ctx = fake.ctx()
    plan = prune.decide(prune.read(ctx), fake.settings, NIGHT)
    assert [e.id for e in plan.prune] == ["ep-lunch"]  # the rule is evidence; the recent one is not stale
    assert prune.write(ctx, plan)["pruned"] == 1
    (gone,) = fake.graph.get_episodes(["ep-lunch"])
    assert gone.status is EpisodeStatus.PRUNED and gone.text == ""
    assert fake.graph.tombstone_nodes["ep-lunch"]["reason"] == "stale and unmatched"
    assert fake.vectors.present(TEAM, "episodes") == {"ep-rule", "ep-recent"}
    assert prune.decide(prune.read(fake.ctx()), fake.settings, NIGHT).empty()  # a rerun has nothing left to do
