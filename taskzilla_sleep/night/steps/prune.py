"""03:05 prune: drop stale, unmatched episode vectors; clear vectors of items that are no longer live.

An episode is pruned when it has not been touched (ingested, read by recall) for
``prune.stale_after_days``, is raw (never absorbed), not pinned, evidence of no pattern, and less
similar than ``prune.match_threshold`` to every active pattern. The graph keeps a tombstone
(id, time, reason) and the node without its text, so the audit trail stays whole. Vectors of
superseded/retired patterns and of retired/pruned episodes leave Chroma too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from taskzilla_sleep.core.models import Episode, EpisodeStatus, PatternStatus
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.night.steps.base import PlanBase, StepContext, Vector, retire_episodes
from taskzilla_sleep.rules.policies import last_touched, prune_eligible
from taskzilla_sleep.stores.ports import Retirement, VectorKind


@dataclass(frozen=True)
class PruneInputs:
    team: str
    examined: int  # raw episodes of the team
    stale: tuple[Episode, ...]  # raw, unpinned, untouched since the cutoff, evidence of no pattern
    episode_vectors: Mapping[str, Vector]  # of the stale ones
    pattern_vectors: Mapping[str, Vector]  # of the active patterns
    vectors_present: Mapping[VectorKind, frozenset[str]]  # every id with a vector, by kind
    live: Mapping[VectorKind, frozenset[str]]  # every live graph item, by kind


@dataclass
class PrunePlan(PlanBase):
    team: str
    prune: list[Episode] = field(default_factory=list)
    orphan_vectors: dict[VectorKind, list[str]] = field(default_factory=dict)
    examined: int = 0

    def lines(self) -> list[str]:
        out = [f"- prune {e.id} (untouched since {last_touched(e).date()}) {one_line(e.text, 70)}" for e in self.prune]
        out += [
            f"- drop {len(ids)} {kind} vectors of items no longer live"
            for kind, ids in self.orphan_vectors.items()
            if ids
        ]
        return out

    def counts(self) -> dict[str, int]:
        return {
            "examined": self.examined,
            "pruned": len(self.prune),
            "orphan_vectors": sum(len(v) for v in self.orphan_vectors.values()),
        }

    def empty(self) -> bool:
        return not self.prune and not any(self.orphan_vectors.values())


def read(ctx: StepContext) -> PruneInputs:
    cutoff = ctx.now - timedelta(days=ctx.settings.prune.stale_after_days)
    examined = ctx.graph.count_episodes(ctx.team, [EpisodeStatus.RAW.value])
    # Only the stale candidates leave the graph (reading every raw episode grew with the months).
    stale = [e for e in ctx.graph.stale_raw_episodes(ctx.team, cutoff) if not e.pinned and last_touched(e) <= cutoff]
    episode_vectors: dict[str, Vector] = {}
    pattern_vectors: dict[str, Vector] = {}
    if stale:
        evidence = ctx.graph.evidence_episode_ids(ctx.team)
        stale = [e for e in stale if e.id not in evidence]
        active = [x.id for x in ctx.graph.patterns(ctx.team) if x.status is PatternStatus.ACTIVE]
        if stale and active:
            episode_vectors = ctx.vectors_of("episodes", [e.id for e in stale])
            pattern_vectors = ctx.vectors_of("patterns", active)
    return PruneInputs(
        team=ctx.team,
        examined=examined,
        stale=tuple(stale),
        episode_vectors=episode_vectors,
        pattern_vectors=pattern_vectors,
        vectors_present={k: frozenset(ctx.vectors.present(ctx.team, k)) for k in ("episodes", "patterns")},
        live={
            "episodes": frozenset(ctx.graph.live_ids(ctx.team, "episode")),
            "patterns": frozenset(ctx.graph.live_ids(ctx.team, "pattern")),
        },
    )


def decide(inputs: PruneInputs, settings: Settings, now: datetime) -> PrunePlan:
    s = settings.prune
    plan = PrunePlan(team=inputs.team, examined=inputs.examined)
    best = _best_similarity(inputs.episode_vectors, inputs.pattern_vectors)
    stale_after = timedelta(days=s.stale_after_days)
    plan.prune = [
        e for e in inputs.stale if prune_eligible(e, now, stale_after, False, best.get(e.id, -1.0), s.match_threshold)
    ]
    pruned = {e.id for e in plan.prune}
    kinds: tuple[VectorKind, ...] = ("episodes", "patterns")
    for kind in kinds:
        plan.orphan_vectors[kind] = sorted(inputs.vectors_present[kind] - inputs.live[kind] - pruned)
    return plan


def _best_similarity(episodes: Mapping[str, Vector], patterns: Mapping[str, Vector]) -> dict[str, float]:
    if not episodes or not patterns:
        return {}
    ids = sorted(episodes)
    sims = np.stack([episodes[i] for i in ids]) @ np.stack(list(patterns.values())).T
    return {i: float(v) for i, v in zip(ids, sims.max(axis=1), strict=True)}


def write(ctx: StepContext, plan: PrunePlan) -> dict[str, int]:
    rows = [Retirement(e.id, EpisodeStatus.PRUNED, ctx.now, "stale and unmatched") for e in plan.prune]
    retire_episodes(ctx, rows, "prune")
    for kind, ids in plan.orphan_vectors.items():
        if ids:
            ctx.vectors.delete(ctx.team, kind, ids)
    return plan.counts()
