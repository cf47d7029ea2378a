"""When the watchdog is due (pure rules over a graph): new episodes past the threshold after the
cooldown (a lookback pass), or what the last full-window distill deferred (a whole-window pass)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from taskzilla_sleep.core.models import to_ms
from taskzilla_sleep.core.settings import WatchdogSettings
from taskzilla_sleep.night.budget import Deferral
from taskzilla_sleep.night.steps.distill import DEFERRED, LAST_DISTILL, last_deferral
from taskzilla_sleep.night.watchdog import watchdog_due, watchdog_pass
from taskzilla_sleep.stores.memory import MemoryGraphStore

NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
S = WatchdogSettings(cooldown_minutes=30, episode_threshold=3, lookback_hours=2)


def _graph(last: datetime, deferred: str | None) -> MemoryGraphStore:
    graph = MemoryGraphStore()
    graph.set_meta(LAST_DISTILL.format(team="alpha"), str(to_ms(last)))
    if deferred is not None:
        graph.set_meta(DEFERRED.format(team="alpha"), deferred)
    return graph


def test_deferred_groups_make_a_team_due_for_a_whole_window_pass_after_the_cooldown() -> None:
    graph = _graph(NOW - timedelta(hours=7), json.dumps({"groups": 4, "reason": "window"}))
    due = watchdog_pass(graph, "alpha", NOW, S)
    assert due is not None and due.deferred == Deferral("alpha", 4, "window") and due.new_episodes == 0
    request = due.request(NOW, S)
    assert request.lookback is None and list(request.steps or []) == ["distill"] and request.teams == ["alpha"]
    assert request.trigger == "watchdog"
    assert watchdog_due(graph, "alpha", NOW, S) == (False, 0)  # the lookback rule alone: nothing new
    assert watchdog_pass(graph, "alpha", NOW, S.model_copy(update={"take_deferred": False})) is None
    # Within the cooldown of the last distill: not yet.
    assert watchdog_pass(_graph(NOW - timedelta(minutes=10), "x"), "alpha", NOW, S) is None


def test_nothing_deferred_and_nothing_new_is_not_due_and_a_cleared_mark_is_no_deferral() -> None:
    graph = _graph(NOW - timedelta(hours=7), "")
    assert last_deferral(graph, "alpha") is None
    assert watchdog_pass(graph, "alpha", NOW, S) is None


def test_an_unreadable_mark_counts_as_work_left_so_a_pass_looks() -> None:
    graph = _graph(NOW - timedelta(hours=7), "{not json")
    assert last_deferral(graph, "alpha") == Deferral("alpha", 1, "unknown")
    due = watchdog_pass(graph, "alpha", NOW, S)
    assert due is not None and due.request(NOW, S).lookback is None
