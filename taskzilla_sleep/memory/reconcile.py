"""Find and repair drift between the graph (source of truth) and the vector store (derived index).

Drift is an id in one store but not the other: a live graph item without a vector (a crash
between the graph write and the vector write, or a vector deleted behind our back), or a vector
whose item is gone from the graph or no longer live (retired, pruned, superseded). Repair embeds
the missing vectors from the graph's text and deletes the orphans. It also drops what an
interrupted collection rebuild left behind (stores/chroma_generations.py).

An ingest in flight is not drift: the episodes an announced ingest (``inflight.py``) stored and is
still embedding are left out — counted as ``in_flight``, neither reported as drift nor embedded
twice — whichever process runs the ingest and whichever runs the reconcile.

It also keeps the injection flags of stored messages the current lint's (``flags.reflag``): those
stored before flags were kept, or flagged by a lint a release has since changed.

An edit whose follow-up (re-scoring, the new vector) a killed ingest left pending for
``EDIT_STALE_AFTER_S`` is finished here (``ingest.finish_edits``): its writer is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

import structlog
from pydantic import BaseModel, Field

from taskzilla_sleep.memory import inflight
from taskzilla_sleep.memory.admin.forget import DEFAULT_FLOOR
from taskzilla_sleep.memory.edits import finish_edits
from taskzilla_sleep.memory.flags import reflag
from taskzilla_sleep.memory.quarantine import settle
from taskzilla_sleep.memory.vector_meta import episode_metadata, pattern_metadata
from taskzilla_sleep.stores.ports import GraphStore, ItemKind, MetaValue, VectorKind, VectorStore

log = structlog.get_logger(__name__)

KINDS: tuple[tuple[ItemKind, VectorKind], ...] = (("episode", "episodes"), ("pattern", "patterns"))
# A collection rebuild copies a team's vectors in seconds: one still being built after an hour was
# abandoned (younger ones may be another replica's rebuild in flight; superseded ones go at once).
REBUILD_GRACE_S = 3600.0
# An edit's follow-up takes seconds: one pending for ten minutes lost its ingest (as a stale stage).
EDIT_STALE_AFTER_S = 600.0


class DriftCounts(BaseModel):
    missing_vectors: int = 0  # live in the graph, no vector
    orphan_vectors: int = 0  # a vector with no live graph item
    repaired: int = 0
    in_flight: int = 0  # live, no vector yet: an announced ingest is writing it (not drift)


class ReconcileReport(BaseModel):
    repair: bool
    by_team: dict[str, dict[str, DriftCounts]] = Field(default_factory=dict)
    stale_stages: int = 0  # ingests interrupted mid-write whose invisible staged episodes were dropped
    reflagged: int = 0  # stored messages whose injection flag was missing or an older lint's (written unless --check)
    stale_edits: int = 0  # edits whose follow-up an interrupted ingest left pending (finished unless --check)
    quarantined: int = 0  # stored items found unreadable (quarantined unless --check)
    rebuild_leftovers: list[str] = Field(
        default_factory=list
    )  # collections interrupted rebuilds left (dropped unless --check)

    @property
    def missing(self) -> int:
        return sum(c.missing_vectors for kinds in self.by_team.values() for c in kinds.values())

    @property
    def orphans(self) -> int:
        return sum(c.orphan_vectors for kinds in self.by_team.values() for c in kinds.values())

    @property
    def repaired(self) -> int:
        return sum(c.repaired for kinds in self.by_team.values() for c in kinds.values())

    @property
    def in_flight(self) -> int:
        return sum(c.in_flight for kinds in self.by_team.values() for c in kinds.values())

    @property
    def drift(self) -> int:
        return self.missing + self.orphans


def reconcile(
    graph: GraphStore,
    vectors: VectorStore,
    repair: bool = True,
    now: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
    teams: Sequence[str] | None = None,
    floor: float = DEFAULT_FLOOR,
) -> ReconcileReport:
    """``progress(done, total)``: team collections checked (and repaired) so far, of all of them.
    ``teams``: only these (a worker's team job; another replica may be mid-step on any other team).
    ``floor``: ``distill.confidence_floor``, for the beliefs a stale edit's follow-up re-scores."""
    report = ReconcileReport(repair=repair)
    began = inflight.now_ms()  # an ingest running at any time from here on is not drift
    if repair:
        report.stale_stages = graph.drop_stale_stages()
    edits = {t: ids for t, ids in graph.stale_edits(EDIT_STALE_AFTER_S).items() if teams is None or t in teams}
    report.stale_edits = sum(len(ids) for ids in edits.values())
    for team, ids in edits.items() if repair else ():
        log.warning("edit_finished_late", team=team, episodes=len(ids))
        finish_edits(graph, vectors, team, ids, "reconcile", now or datetime.now(UTC), floor)
    report.rebuild_leftovers = vectors.drop_leftovers(REBUILD_GRACE_S, dry_run=not repair)
    teams = sorted(set(graph.teams()) | set(vectors.teams())) if teams is None else sorted(teams)
    total = len(teams) * len(KINDS)
    if progress is not None:
        progress(0, total)
    for t, team in enumerate(teams):
        report.reflagged += reflag(graph, team, repair=repair)
        for k, (kind, vkind) in enumerate(KINDS):
            live = graph.live_ids(team, kind)
            present = vectors.present(team, vkind)
            missing = sorted(live - present)
            orphans = sorted(present - live)
            writing = inflight.writing(graph, team, began) if missing and kind == "episode" else set()
            counts = DriftCounts(in_flight=sum(1 for i in missing if i in writing))
            missing = [i for i in missing if i not in writing]
            counts.missing_vectors, counts.orphan_vectors = len(missing), len(orphans)
            if repair and missing:
                counts.repaired += _embed(graph, vectors, team, kind, vkind, missing)
            if repair and orphans:
                vectors.delete(team, vkind, orphans)
                counts.repaired += len(orphans)
            if counts.in_flight:
                log.info("drift_in_flight_skipped", team=team, kind=kind, episodes=counts.in_flight)
            if missing or orphans:
                log.warning(
                    "drift_found",
                    team=team,
                    kind=kind,
                    missing_vectors=len(missing),
                    orphan_vectors=len(orphans),
                    repaired=counts.repaired,
                )
            report.by_team.setdefault(team, {})[vkind] = counts
            if progress is not None:
                progress(t * len(KINDS) + k + 1, total)
    # Unreadable items met on the way are quarantined (their vectors go): the next reconcile is clean.
    report.quarantined = len(settle(graph, vectors, now or datetime.now(UTC), dry_run=not repair))
    log.info(
        "reconcile_finished",
        missing=report.missing,
        orphans=report.orphans,
        repaired=report.repaired,
        in_flight=report.in_flight,
        stale_stages=report.stale_stages,
        stale_edits=report.stale_edits,
        reflagged=report.reflagged,
        quarantined=report.quarantined,
        rebuild_leftovers=len(report.rebuild_leftovers),
    )
    return report


def _embed(
    graph: GraphStore, vectors: VectorStore, team: str, kind: ItemKind, vkind: VectorKind, ids: list[str]
) -> int:
    texts = graph.live_texts(team, kind, ids)
    metas: Mapping[str, dict[str, MetaValue]]
    if kind == "episode":
        metas = {e.id: episode_metadata(e) for e in graph.get_episodes(list(texts))}
    else:
        metas = {p.id: pattern_metadata(p) for p in graph.patterns_by_id(list(texts))}
    todo = [i for i in ids if i in texts and i in metas]
    if todo:
        vectors.upsert(team, vkind, todo, [texts[i] for i in todo], [metas[i] for i in todo])
    return len(todo)
