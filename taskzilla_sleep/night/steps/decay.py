"""03:25 decay: retire raw episodes already absorbed into a high-confidence pattern, after the grace.

Eligible: ``schema_absorbed=1``, ``absorbed_at`` at least ``decay.grace_hours`` ago, and the
absorbing pattern still active, not contested, not the unconfirmed side of an open update, and at
or above the floor. Retired: the vector leaves Chroma, the text leaves the graph, a tombstone keeps
(id, time, pattern it fed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import Episode, EpisodeStatus, Pattern
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.memory.vector_upkeep import rebuild_heavy
from taskzilla_sleep.night.steps.base import PlanBase, StepContext, retire_episodes
from taskzilla_sleep.rules.policies import decay_eligible
from taskzilla_sleep.stores.ports import Retirement


@dataclass(frozen=True)
class DecayInputs:
    team: str
    absorbed: tuple[Episode, ...]
    patterns: Mapping[str, Pattern]  # the patterns that absorbed them
    held: frozenset[str]  # both beliefs of every open contradiction


@dataclass
class DecayPlan(PlanBase):
    team: str
    retire: list[tuple[Episode, str]] = field(default_factory=list)  # (episode, pattern id)
    waiting: int = 0  # absorbed, still in their grace period or held by a contested/weak pattern

    def lines(self) -> list[str]:
        return [f"- retire {e.id} (absorbed into {pid}) {one_line(e.text, 70)}" for e, pid in self.retire]

    def counts(self) -> dict[str, int]:
        return {"retired": len(self.retire), "waiting": self.waiting}

    def empty(self) -> bool:
        return not self.retire


def read(ctx: StepContext) -> DecayInputs:
    absorbed = ctx.graph.episodes_by_status(ctx.team, [EpisodeStatus.ABSORBED.value])
    pids = sorted({e.absorbed_by for e in absorbed if e.absorbed_by})
    held = {i for c in ctx.graph.contradictions(ctx.team, "open") for i in c.pattern_ids}
    patterns = {x.id: x for x in ctx.graph.patterns_by_id(pids)}
    return DecayInputs(team=ctx.team, absorbed=tuple(absorbed), patterns=patterns, held=frozenset(held))


def decide(inputs: DecayInputs, settings: Settings, now: datetime) -> DecayPlan:
    plan = DecayPlan(team=inputs.team)
    grace = timedelta(hours=settings.decay.grace_hours)
    floor = settings.distill.confidence_floor
    for e in inputs.absorbed:
        pat = inputs.patterns.get(e.absorbed_by or "")
        # The new belief of an open update stays active, unconfirmed: if a person keeps the old one,
        # its messages must still be there.
        if decay_eligible(e, pat, now, grace, floor) and pat is not None and pat.id not in inputs.held:
            plan.retire.append((e, pat.id))
        else:
            plan.waiting += 1
    return plan


def write(ctx: StepContext, plan: DecayPlan) -> dict[str, int]:
    rows = [Retirement(e.id, EpisodeStatus.RETIRED, ctx.now, "absorbed", pid) for e, pid in plan.retire]
    retire_episodes(ctx, rows, "decay")
    crashpoint("decay.after_vectors")
    counts = plan.counts()
    # What runs changed longer ago than decay.archive_days can no longer be undone: its images go.
    purged = ctx.graph.purge_archive(ctx.now - timedelta(days=ctx.settings.decay.archive_days), ctx.now)
    if purged:
        counts["archive_purged"] = len(purged)
    # Maintenance, not a decision: the night's deletes are done; drop their dead HNSW slots.
    rebuilt = rebuild_heavy(ctx.vectors, ctx.team, ctx.settings.vector.rebuild_deleted_ratio)
    return counts | {"collections_rebuilt": rebuilt} if rebuilt else counts
