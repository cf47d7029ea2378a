"""Edited messages: which version of a stored message an item is, and what follows an edit's graph write.

An item with ``edited_at`` whose id is stored with the same team, channel, author, time and
provenance is a version of that message. A version newer than the stored one replaces its text
(``GraphStore.edit_episodes``: one atomic write, which also makes the message raw, undistilled and
no pattern's evidence, and sets ``edit_pending``); then the patterns that named it are re-scored
without it, its vector is written from the new text and ``edit_pending`` is cleared. A crash in
between leaves ``edit_pending`` set: the same ingest run again (or any later ingest of the message)
finishes the follow-up, so it converges on what one uninterrupted run leaves; ``reconcile`` finishes
one left pending for ten minutes (its ingest is gone). A version as old as or older than the stored
one (an item without ``edited_at`` is the first version) is a no-op.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import structlog

from taskzilla_sleep.core.faults import crashpoint
from taskzilla_sleep.core.models import EPISODE_LIVE, Episode, to_ms
from taskzilla_sleep.memory.admin.forget import DEFAULT_FLOOR, ForgetReport, rescore_without
from taskzilla_sleep.memory.vector_meta import episode_metadata
from taskzilla_sleep.stores.ports import EpisodeUpdate, GraphStore, StoredEpisode, VectorStore

log = structlog.get_logger(__name__)

EditVerdict = Literal["apply", "older", "ignore"]


def version_of(ep: Episode) -> int:
    """Which version of its message ``ep`` is: its edit time (ms), -1 for the text as first sent."""
    return to_ms(ep.edited_at) if ep.edited_at is not None else -1


def edit_verdict(ep: Episode, stored: StoredEpisode) -> EditVerdict | None:
    """What to do with ``ep`` whose id is stored with other content: ``apply`` a newer version of the
    message, a no-op for a version as old or older (``older``) or for a message whose text is gone
    (``ignore``); None when it is not a version of the stored message (an id clash: an error).

    A version is the same team, channel, author, time and provenance with another text; it is one only
    when either side says it was edited (the same id with other text and no edit time is an error)."""
    if stored.fields.get("team") != ep.team:
        return None
    if any(stored.fields.get(f) is not None and stored.fields[f] != v for f, v in ep.content().items() if f != "text"):
        return None
    if ep.edited_at is None and stored.edited_at_ms is None:
        return None
    if version_of(ep) <= (stored.edited_at_ms if stored.edited_at_ms is not None else -1):
        return "older"
    return "apply" if stored.status in EPISODE_LIVE else "ignore"


def finish_edits(
    graph: GraphStore,
    vectors: VectorStore,
    team: str,
    ids: Sequence[str],
    source: str,
    now: datetime,
    floor: float = DEFAULT_FLOOR,
) -> ForgetReport:
    """What follows an edit's graph write (``edit_episodes``), each part idempotent: the patterns that
    named the messages as evidence re-scored without them, their vectors written from the text the
    graph now holds, then ``edit_pending`` cleared. Until then, a rerun of the ingest (or reconcile,
    once the mark is stale) finds them pending and does it again."""
    gone = set(ids)
    report = ForgetReport(team=team, by="ingest", reason=f"edited ({source})")
    reason = f"its message was edited ({source})"
    rescore_without(graph, vectors, team, gone, "ingest", reason, now, floor, report, cause="edited")
    crashpoint("ingest.after_edit_rescore")
    texts = graph.live_texts(team, "episode", sorted(gone))
    fresh = {e.id: e for e in graph.get_episodes(sorted(texts))}
    todo = sorted(i for i in texts if i in fresh)
    if todo:
        vectors.upsert(team, "episodes", todo, [texts[i] for i in todo], [episode_metadata(fresh[i]) for i in todo])
    graph.update_episodes([EpisodeUpdate(id=i, edit_pending=None) for i in sorted(gone)])
    log.info(
        "episodes_edited",
        team=team,
        episodes=len(gone),
        source=source,
        patterns_rescored=len(report.patterns_rescored),
        patterns_retired=len(report.patterns_retired),
        episodes_returned=len(report.episodes_returned),
    )
    return report
