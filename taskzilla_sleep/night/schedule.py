"""When things run: the nightly slots (apscheduler's CronTrigger, DST-correct) and the clock.

The worker runs one ordered chain a night: prune at its slot, then each later step at its own
slot but never before its predecessor finished. A night is identified by its slot key (the local
date of the prune slot), which the run ledger records, so a night runs exactly once.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from taskzilla_sleep.core.models import STEP_NAMES, StepName
from taskzilla_sleep.core.settings import ScheduleSettings


class Clock(Protocol):
    def now(self) -> datetime: ...

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        """Sleep ``seconds`` of clock time; return early (True) when ``wake`` is set."""
        ...


class RealClock:
    def __init__(self, tz: ZoneInfo) -> None:
        self._tz = tz

    def now(self) -> datetime:
        return datetime.now(self._tz)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return wake.wait(max(0.0, seconds))


class ScaledClock:
    """A controlled clock for replays and tests: starts at ``start`` and runs ``speed`` times faster."""

    def __init__(self, start: datetime, speed: float) -> None:
        self._start = start
        self._speed = speed
        self._t0 = time.monotonic()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=(time.monotonic() - self._t0) * self._speed)

    def sleep(self, seconds: float, wake: threading.Event) -> bool:
        return wake.wait(max(0.0, seconds) / self._speed)


class NightlySchedule:
    def __init__(self, s: ScheduleSettings) -> None:
        self.tz = ZoneInfo(s.timezone)
        self._slots = {name: getattr(s, name) for name in STEP_NAMES}
        self._triggers = {
            name: CronTrigger(hour=t.hour, minute=t.minute, second=t.second, timezone=self.tz)
            for name, t in self._slots.items()
        }
        self.misfire_grace = timedelta(minutes=s.misfire_grace_minutes)
        end = s.window_end
        self._window_end = CronTrigger(hour=end.hour, minute=end.minute, second=end.second, timezone=self.tz)
        self.window_grace = timedelta(minutes=s.window_grace_minutes)

    def next_night(self, after: datetime) -> datetime:
        """The first prune slot strictly after ``after``."""
        fire = self._triggers["prune"].get_next_fire_time(None, after + timedelta(microseconds=1))
        assert fire is not None  # a daily cron always has a next time
        return fire  # type: ignore[no-any-return]

    def last_night(self, now: datetime) -> datetime:
        """The most recent prune slot at or before ``now``."""
        probe = now - timedelta(days=2)
        last = self.next_night(probe)
        while True:
            nxt = self.next_night(last)
            if nxt > now:
                return last
            last = nxt

    def step_slot(self, night: datetime, step: StepName) -> datetime:
        """When ``step`` may start in the night that began at ``night`` (its prune slot)."""
        if step == "prune":
            return night
        fire = self._triggers[step].get_next_fire_time(None, night)
        assert fire is not None
        return fire  # type: ignore[no-any-return]

    def deadline(self, night: datetime) -> datetime:
        """The hard stop of the night that began at ``night``: the first window_end at or after its
        prune slot, plus the grace (a catch-up night started late gets no window of its own)."""
        fire = self._window_end.get_next_fire_time(None, night)
        assert fire is not None
        return fire + self.window_grace  # type: ignore[no-any-return]

    def key(self, night: datetime) -> str:
        return night.astimezone(self.tz).date().isoformat()


def calendar_night(t: datetime, s: ScheduleSettings) -> str:
    """The calendar night ``t`` belongs to: the key (local date) of the last nightly slot at or before
    it. The day after a night belongs to that night (a watchdog pass at 14:00, a run-once, a catch-up
    before the next slot); the next slot begins the next one. A scheduled night's runs record the same
    key as their ``slot``."""
    schedule = NightlySchedule(s)
    return schedule.key(schedule.last_night(t))
