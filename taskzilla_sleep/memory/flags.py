"""The injection flag of stored messages, kept current: the one pass that writes it after ingest.

Ingest (and an edit) compute a message's flag once and keep it on the episode (``rules.beliefs.flagged``);
readers never run the lint again. Two kinds of stored flag are not the current lint's: none at all
(a message stored before flags were kept: readers lint it as they read it, never taking it as clean)
and one an older lint computed (a release that changed the lint's patterns: ``LINT_VERSION``).
:func:`reflag` flags every live message of a team again under the current lint and then records
that lint's version in the team's ``INJECTION_LINT`` meta key; while the key names the current lint
it does nothing. ``reconcile`` runs it, so the night (which reconciles its teams first) and
``taskzilla-sleep reconcile`` after an upgrade both do.

Crash safety: a flag is written only while the episode still holds the text it was computed from
(``GraphStore.flag_episodes``: an edit since carries its own), and the version last, once every flag is
written; a pass interrupted anywhere is done again whole by the next, which converges on the same state.
The key is not exported: an import computes the flags of what it writes itself (``admin/transfer.py``).
"""

from __future__ import annotations

import structlog

from taskzilla_sleep.rules.beliefs import LINT_VERSION, flagged
from taskzilla_sleep.stores.ports import EpisodeFlag, GraphStore

log = structlog.get_logger(__name__)

# The version of the lint that judged every stored flag of the team (``rules.beliefs.LINT_VERSION``).
INJECTION_LINT = "injection_lint:{team}"
BATCH = 500


def reflag(graph: GraphStore, team: str, repair: bool = True) -> int:
    """Flag every live message of ``team`` whose stored flag is missing or not the current lint's
    answer, unless the team's flags are known to be the current lint's. Returns how many flags were
    written (with ``repair``), or would be (without: nothing is written)."""
    key = INJECTION_LINT.format(team=team)
    if graph.get_meta(key) == LINT_VERSION:
        return 0
    ids = sorted(graph.live_ids(team, "episode"))
    todo: list[EpisodeFlag] = []
    for i in range(0, len(ids), BATCH):
        for e in graph.get_episodes(ids[i : i + BATCH]):
            now = flagged(e.text)
            if e.injection is not now:
                todo.append(EpisodeFlag(e.id, e.text, now))
    if not repair:
        return len(todo)
    for i in range(0, len(todo), BATCH):
        graph.flag_episodes(todo[i : i + BATCH])
    graph.set_meta(key, LINT_VERSION)
    if todo:
        shown = sum(1 for f in todo if f.injection)
        log.info("injection_flags_written", team=team, episodes=len(todo), flagged=shown, lint=LINT_VERSION)
    return len(todo)
