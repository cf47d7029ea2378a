"""The daytime watchdog: a small distill so that a rule taught at 10:00 is usable by ~10:35.

Due when at least ``watchdog.episode_threshold`` new raw episodes arrived since the last distill
(nightly or watchdog) and at least ``watchdog.cooldown_minutes`` have passed since it. The distill
then reads only the last ``watchdog.lookback_hours``. Pure decision here; the worker runs it under
the shared lease, so it never overlaps a nightly step or another distill.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from taskzilla_sleep.settings import WatchdogSettings
from taskzilla_sleep.steps.distill import last_distill
from taskzilla_sleep.stores.ports import GraphStore


def watchdog_due(graph: GraphStore, team: str, now: datetime, s: WatchdogSettings) -> tuple[bool, int]:
    """(due, new episodes since the last distill)."""
    last = last_distill(graph, team)
    if last is not None and now - last < timedelta(minutes=s.cooldown_minutes):
        return False, 0
    since = last if last is not None else now - timedelta(hours=s.lookback_hours)
    n = graph.count_new_raw(team, since)
    return n >= s.episode_threshold, n
