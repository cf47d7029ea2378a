"""The groups distill gave up on, and asking them again (`taskzilla-sleep distill retry`).

A group whose question got no usable answer on ``distill.max_attempts`` distinct nights is given up:
its new episodes are marked taken into account (``distilled_at``) with their failed nights kept
(``distill_attempts``) — the only episodes that keep both (an answer, or no group at all, clears
the count), so a given-up episode is told whatever ``max_attempts`` says today. Releasing them clears
both, so the next nightly distill counts them as new and asks about their group again, with
``max_attempts`` fresh nights. Nothing is asked here: the model may still be the one that failed,
and the night's budget and window hold as for any other group.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from taskzilla_sleep.stores.ports import EpisodeUpdate, GraphStore

log = structlog.get_logger(__name__)

BATCH = 2000  # episodes released per write


def given_up(graph: GraphStore, team: str | None = None) -> dict[str, int]:
    """Per team (of every team, or ``team``), the raw episodes whose group distill gave up on."""
    return {t: len(ids) for t, ids in graph.given_up_episodes(team).items()}


def release_given_up(graph: GraphStore, teams: Sequence[str]) -> dict[str, int]:
    """Each team's given-up episodes pending for the next nightly distill again, with their failed
    nights forgotten; per team, how many. The caller holds the consolidation lease (no night writes
    these marks meanwhile)."""
    out: dict[str, int] = {}
    for team in teams:
        ids = graph.given_up_episodes(team).get(team, [])
        for i in range(0, len(ids), BATCH):
            graph.update_episodes(
                [
                    EpisodeUpdate(id=x, distilled_at=None, distill_attempts=None, distill_night=None)
                    for x in ids[i : i + BATCH]
                ]
            )
        out[team] = len(ids)
        log.info("distill_given_up_released", team=team, episodes=len(ids))
    return out
