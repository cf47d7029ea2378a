"""03:25 decay: retire raw episodes already absorbed into a high-confidence pattern, after the grace.

Eligible: ``schema_absorbed=1``, ``absorbed_at`` at least ``decay.grace_hours`` ago, and the
absorbing pattern still active, not contested, not the unconfirmed side of an open update, and at
or above the floor. Retired: the vector
leaves Chroma, the text leaves the graph, a tombstone keeps (id, time, pattern it fed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.models import Episode, EpisodeStatus
from taskzilla_sleep.policies import decay_eligible
from taskzilla_sleep.steps.base import StepContext, retire_episodes
from taskzilla_sleep.stores.ports import Retirement
from taskzilla_sleep.text import one_line


@dataclass
class DecayPlan:
    team: str
    step: str = "decay"
    retire: list[tuple[Episode, str]] = field(default_factory=list)  # (episode, pattern id)
    waiting: int = 0  # absorbed, still in their grace period or held by a contested/weak pattern

    def lines(self) -> list[str]:
        return [f"- retire {e.id} (absorbed into {pid}) {one_line(e.text, 70)}" for e, pid in self.retire]

    def counts(self) -> dict[str, int]:
        return {"retired": len(self.retire), "waiting": self.waiting}

    def empty(self) -> bool:
        return not self.retire


def plan(ctx: StepContext) -> DecayPlan:
    p = DecayPlan(team=ctx.team)
    absorbed = ctx.graph.episodes_by_status(ctx.team, [EpisodeStatus.ABSORBED.value])
    pids = sorted({e.absorbed_by for e in absorbed if e.absorbed_by})
    patterns = {x.id: x for x in ctx.graph.patterns_by_id(pids)}
    grace = timedelta(hours=ctx.settings.decay.grace_hours)
    floor = ctx.settings.distill.confidence_floor
    # The new belief of an open update stays active, unconfirmed: if a person keeps the old one,
    # its messages must still be there.
    held = {i for c in ctx.graph.contradictions(ctx.team, "open") for i in (c.old_pattern_id, c.new_pattern_id)}
    for e in absorbed:
        pat = patterns.get(e.absorbed_by or "")
        if decay_eligible(e, pat, ctx.now, grace, floor) and pat is not None and pat.id not in held:
            p.retire.append((e, pat.id))
        else:
            p.waiting += 1
    return p


def apply(ctx: StepContext, plan: DecayPlan) -> dict[str, int]:
    rows = [Retirement(e.id, EpisodeStatus.RETIRED, ctx.now, "absorbed", pid) for e, pid in plan.retire]
    retire_episodes(ctx, rows, "decay")
    crashpoint("decay.after_vectors")
    return plan.counts()
