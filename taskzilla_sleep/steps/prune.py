"""03:05 prune: drop stale, unmatched episode vectors; clear vectors of items that are no longer live.

An episode is pruned when it has not been touched (ingested, read by recall) for
``prune.stale_after_days``, is raw (never absorbed), not pinned, evidence of no pattern, and less
similar than ``prune.match_threshold`` to every active pattern. The graph keeps a tombstone
(id, time, reason) and the node without its text, so the audit trail stays whole. Vectors of
superseded/retired patterns and of retired/pruned episodes leave Chroma too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from taskzilla_sleep.models import Episode, EpisodeStatus, PatternStatus
from taskzilla_sleep.policies import last_touched, prune_eligible
from taskzilla_sleep.steps.base import StepContext, retire_episodes
from taskzilla_sleep.stores.ports import Retirement, VectorKind
from taskzilla_sleep.text import one_line


@dataclass
class PrunePlan:
    team: str
    step: str = "prune"
    prune: list[Episode] = field(default_factory=list)
    orphan_vectors: dict[str, list[str]] = field(default_factory=dict)  # kind -> ids
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


def plan(ctx: StepContext) -> PrunePlan:
    s = ctx.settings.prune
    p = PrunePlan(team=ctx.team)
    stale_after = timedelta(days=s.stale_after_days)
    cutoff = ctx.now - stale_after
    # Only the stale candidates leave the graph (reading every raw episode grew with the months).
    p.examined = ctx.graph.count_episodes(ctx.team, [EpisodeStatus.RAW.value])
    stale = [e for e in ctx.graph.stale_raw_episodes(ctx.team, cutoff) if not e.pinned and last_touched(e) <= cutoff]
    if stale:
        evidence = ctx.graph.evidence_episode_ids(ctx.team)
        stale = [e for e in stale if e.id not in evidence]
        active = [x.id for x in ctx.graph.patterns(ctx.team) if x.status is PatternStatus.ACTIVE]
        best = _best_similarity(ctx, [e.id for e in stale], active)
        p.prune = [
            e for e in stale if prune_eligible(e, ctx.now, stale_after, False, best.get(e.id, -1.0), s.match_threshold)
        ]
    pruned = {e.id for e in p.prune}
    for item, kind in (("episode", "episodes"), ("pattern", "patterns")):
        vk: VectorKind = kind  # type: ignore[assignment]
        present = ctx.vectors.present(ctx.team, vk)
        live = ctx.graph.live_ids(ctx.team, item)  # type: ignore[arg-type]
        p.orphan_vectors[kind] = sorted(present - live - pruned)
    return p


def _best_similarity(ctx: StepContext, episode_ids: list[str], pattern_ids: list[str]) -> dict[str, float]:
    if not episode_ids or not pattern_ids:
        return {}
    ev = ctx.vectors_of("episodes", episode_ids)
    pv = ctx.vectors_of("patterns", pattern_ids)
    if not ev or not pv:
        return {}
    eids = sorted(ev)
    sims = np.stack([ev[i] for i in eids]) @ np.stack(list(pv.values())).T
    return {i: float(v) for i, v in zip(eids, sims.max(axis=1), strict=True)}


def apply(ctx: StepContext, plan: PrunePlan) -> dict[str, int]:
    rows = [Retirement(e.id, EpisodeStatus.PRUNED, ctx.now, "stale and unmatched") for e in plan.prune]
    retire_episodes(ctx, rows, "prune")
    for kind, ids in plan.orphan_vectors.items():
        if ids:
            ctx.vectors.delete(ctx.team, kind, ids)  # type: ignore[arg-type]
    return plan.counts()
