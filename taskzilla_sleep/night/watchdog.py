"""The daytime watchdog: a small distill so that a rule taught at 10:00 is usable by ~10:35, and the
groups a night's budget or window left (issue 15: "taken first the next night or by the watchdog").

Due when at least ``watchdog.cooldown_minutes`` have passed since the last distill (nightly or
watchdog) and either at least ``watchdog.episode_threshold`` new raw episodes arrived since it — the
distill then reads only the last ``watchdog.lookback_hours`` and marks nothing — or the last distill
over the whole window deferred groups (``watchdog.take_deferred``). Those groups' episodes are as old
as the distill window, and a lookback distill counts as new only what arrived since the last distill,
so it would never ask them; the pass that takes them is the night's distill instead (the whole window,
``lookback`` None): it asks what an unbudgeted night would have asked and marks it, so the next night
does not ask it again. Pure decisions here; the worker runs the pass under the team's lease, so it
never overlaps a step of the team's night or another distill.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from taskzilla_sleep.core.settings import WatchdogSettings
from taskzilla_sleep.night.budget import Deferral
from taskzilla_sleep.night.pipeline import NightRequest
from taskzilla_sleep.night.steps.distill import last_deferral, last_distill
from taskzilla_sleep.stores.ports import GraphStore


@dataclass(frozen=True)
class WatchdogPass:
    """A watchdog distill that is due for ``team``."""

    team: str
    new_episodes: int
    deferred: Deferral | None  # set: the pass takes what the last night left, over the whole window

    def request(self, now: datetime, s: WatchdogSettings) -> NightRequest:
        lookback = None if self.deferred is not None else timedelta(hours=s.lookback_hours)
        return NightRequest(now=now, steps=["distill"], trigger="watchdog", teams=[self.team], lookback=lookback)


def watchdog_pass(graph: GraphStore, team: str, now: datetime, s: WatchdogSettings) -> WatchdogPass | None:
    """The pass due for ``team`` at ``now``, or None."""
    n = _new_episodes(graph, team, now, s)
    if n is None:
        return None
    deferred = last_deferral(graph, team) if s.take_deferred else None
    if deferred is None and n < s.episode_threshold:
        return None
    return WatchdogPass(team, n, deferred)


def watchdog_due(graph: GraphStore, team: str, now: datetime, s: WatchdogSettings) -> tuple[bool, int]:
    """(due for new episodes, new episodes since the last distill): the lookback rule alone."""
    n = _new_episodes(graph, team, now, s)
    return (False, 0) if n is None else (n >= s.episode_threshold, n)


def _new_episodes(graph: GraphStore, team: str, now: datetime, s: WatchdogSettings) -> int | None:
    """New raw episodes since the last distill; None while its cooldown lasts."""
    last = last_distill(graph, team)
    if last is not None and now - last < timedelta(minutes=s.cooldown_minutes):
        return None
    since = last if last is not None else now - timedelta(hours=s.lookback_hours)
    return graph.count_new_raw(team, since)
