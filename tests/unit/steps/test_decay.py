"""Decay: its pure decision on plain data, and the whole step on the in-memory stores."""

from __future__ import annotations

from datetime import timedelta

from taskzilla_sleep.core.models import Contradiction, EpisodeStatus, PatternStatus
from taskzilla_sleep.night.steps import decay
from tests.unit.steps.conftest import NIGHT, TEAM, Fake, episode, pattern

LONG_AGO = NIGHT - timedelta(hours=80)  # past the 72 h grace
LATELY = NIGHT - timedelta(hours=10)


def absorbed(i: str, into: str, at: object = LONG_AGO) -> object:
    return episode(i, f"rule {i}", status=EpisodeStatus.ABSORBED, schema_absorbed=1, absorbed_at=at, absorbed_by=into)


def test_decide_retires_only_past_the_grace_into_an_active_belief_at_the_floor(fake: Fake) -> None:
    eps = (
        absorbed("a", "pat-ok"),
        absorbed("b", "pat-ok", at=LATELY),
        absorbed("c", "pat-weak"),
        absorbed("d", "pat-contested"),
        absorbed("e", "pat-held"),
    )
    pats = {
        "pat-ok": pattern("pat-ok", "x", []),
        "pat-weak": pattern("pat-weak", "y", [], confidence=0.5),
        "pat-contested": pattern("pat-contested", "z", [], status=PatternStatus.CONTESTED),
        "pat-held": pattern("pat-held", "w", []),
    }
    plan = decay.decide(decay.DecayInputs(TEAM, eps, pats, frozenset({"pat-held"})), fake.settings, NIGHT)  # type: ignore[arg-type]
    assert [(e.id, pid) for e, pid in plan.retire] == [("ep-a", "pat-ok")]
    assert plan.counts() == {"retired": 1, "waiting": 4}


def test_the_step_on_the_fake_retires_and_leaves_a_tombstone(fake: Fake) -> None:
    rules = [absorbed(str(i), "pat-1") for i in range(3)]
    fake.add(*rules)  # type: ignore[arg-type]
    fake.add_pattern(pattern("pat-1", "Deploys go through the release train.", rules))  # type: ignore[arg-type]
    ctx = fake.ctx()
    counts = decay.write(ctx, decay.decide(decay.read(ctx), fake.settings, NIGHT))
    # Every episode vector deleted: the emptied collection is rebuilt (its dead slots dropped).
    assert counts == {"retired": 3, "waiting": 0, "collections_rebuilt": 1}
    assert fake.vectors.health(TEAM, "episodes").__dict__ == {"live": 0, "deleted": 0, "generation": 1}
    assert {e.status for e in fake.graph.get_episodes([f"ep-{i}" for i in range(3)])} == {EpisodeStatus.RETIRED}
    assert fake.graph.tombstone_nodes["ep-0"]["pattern_id"] == "pat-1"
    assert fake.vectors.present(TEAM, "episodes") == set()


def test_an_open_contradiction_holds_both_sides_back(fake: Fake) -> None:
    rules = [absorbed(str(i), "pat-new") for i in range(3)]
    fake.add(*rules)  # type: ignore[arg-type]
    fake.add_pattern(pattern("pat-old", "Standups are async.", []))
    fake.add_pattern(pattern("pat-new", "Standup is a voice call.", rules))  # type: ignore[arg-type]
    c = Contradiction(id="con-1", team=TEAM, old_pattern_id="pat-old", new_pattern_id="pat-new", opened_at=LATELY)
    fake.graph.open_contradiction(c.model_copy(update={"kind": "update"}), counter=3, old_confidence=0.5)
    plan = decay.decide(decay.read(fake.ctx()), fake.settings, NIGHT)
    assert plan.retire == [] and plan.waiting == 3
