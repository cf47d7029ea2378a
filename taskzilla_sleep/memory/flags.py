"""The injection flag of stored messages: computed once by the ingest or edit that writes a text, and
the one pass that writes it for a message stored without a current one.

Ingest (and an edit) compute a message's flag once and keep it on the episode with the version of
the lint that computed it (``with_flag``; ``rules.beliefs.flagged``, ``LINT_VERSION``); readers never
run the lint again. A stored message has no current flag when it was stored before flags were kept,
or flagged by an older lint (a release changed the lint's patterns): readers lint it as they read it,
never taking it as clean, and :func:`reflag` writes its flag. ``reconcile`` runs it, so the night
(which reconciles its teams first) and ``taskzilla-sleep reconcile`` after an upgrade both do.

Crash safety: a flag is written only while the episode still holds the text it was computed from
(``GraphStore.flag_episodes``: an edit since carries its own); each write is whole, and a pass
interrupted anywhere leaves the rest without a current flag, for the next pass.
"""

from __future__ import annotations

import structlog

from taskzilla_sleep.core.models import Episode
from taskzilla_sleep.rules.beliefs import LINT_VERSION, flagged
from taskzilla_sleep.stores.ports import EpisodeFlag, GraphStore

log = structlog.get_logger(__name__)

BATCH = 500


def with_flag(ep: Episode) -> Episode:
    """``ep`` with the injection flag of its text, by this lint."""
    return ep.model_copy(update={"injection": flagged(ep.text), "injection_lint": LINT_VERSION})


def reflag(graph: GraphStore, team: str, repair: bool = True) -> int:
    """Flag every live message of ``team`` that has no flag by the current lint. Returns how many
    flags were written (with ``repair``), or would be (without: nothing is written)."""
    texts = graph.unflagged_episodes(team, LINT_VERSION)
    if not repair or not texts:
        return len(texts)
    todo = [EpisodeFlag(i, t, flagged(t), LINT_VERSION) for i, t in sorted(texts.items())]
    written = 0
    for i in range(0, len(todo), BATCH):
        written += graph.flag_episodes(todo[i : i + BATCH])
    shown = sum(1 for f in todo if f.injection)
    log.info("injection_flags_written", team=team, episodes=written, flagged=shown, lint=LINT_VERSION)
    return written
