from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from datetime import time as dtime
from zoneinfo import ZoneInfo

import pytest

from taskzilla_sleep.core.settings import ScheduleSettings
from taskzilla_sleep.night.schedule import NightlySchedule, ScaledClock

AMS = ZoneInfo("Europe/Amsterdam")


@pytest.mark.parametrize("start", [datetime(2027, 3, 24, 12, tzinfo=AMS), datetime(2027, 10, 27, 12, tzinfo=AMS)])
def test_each_night_once_at_0305_local_across_dst(start: datetime) -> None:
    s = NightlySchedule(ScheduleSettings())
    nights, t = [], start
    for _ in range(10):
        t = s.next_night(t)
        nights.append(t)
    local = [n.astimezone(AMS) for n in nights]
    assert all(n.time() == dtime(3, 5) for n in local)
    dates = [n.date() for n in local]
    assert dates == [start.date() + timedelta(days=i + 1) for i in range(10)]  # every date once, none skipped
    utc = [n.astimezone(ZoneInfo("UTC")) for n in nights]  # same-zone subtraction would ignore DST
    gaps = {(b - a) for a, b in zip(utc, utc[1:], strict=False)}
    assert gaps <= {timedelta(hours=23), timedelta(hours=24), timedelta(hours=25)}
    assert len(gaps) == 2  # the DST night is 23 h (March) or 25 h (October) long


def test_step_slots_and_keys() -> None:
    s = NightlySchedule(ScheduleSettings())
    night = datetime(2027, 3, 28, 3, 5, tzinfo=AMS)  # the first night of summer time
    assert [s.step_slot(night, x).astimezone(AMS).time() for x in ("prune", "distill", "reflect", "decay")] == [
        dtime(3, 5),
        dtime(3, 10),
        dtime(3, 15),
        dtime(3, 25),
    ]
    assert s.key(night) == "2027-03-28"
    assert s.last_night(datetime(2027, 3, 28, 3, 4, tzinfo=AMS)).date().isoformat() == "2027-03-27"
    assert s.last_night(datetime(2027, 3, 28, 3, 5, tzinfo=AMS)) == night


def test_custom_slots_and_time_zone() -> None:
    s = NightlySchedule(
        ScheduleSettings(
            timezone="America/New_York",
            prune=dtime(1, 0),
            distill=dtime(1, 30),
            reflect=dtime(2, 0),
            decay=dtime(2, 30),
        )
    )
    n = s.next_night(datetime(2027, 11, 6, 12, tzinfo=ZoneInfo("America/New_York")))
    assert n.astimezone(ZoneInfo("America/New_York")).time() == dtime(1, 0)
    assert s.step_slot(n, "decay") - n == timedelta(hours=1, minutes=30)


def test_scaled_clock_runs_fast_and_wakes_on_event() -> None:
    c = ScaledClock(datetime(2027, 1, 1, tzinfo=AMS), speed=3600)
    t0 = c.now()
    wake = threading.Event()
    started = time.monotonic()
    assert c.sleep(3600, wake) is False  # one clock hour = one real second
    assert 0.9 <= time.monotonic() - started < 3
    assert c.now() - t0 >= timedelta(minutes=59)
    wake.set()
    assert c.sleep(36000, wake) is True


@pytest.mark.parametrize(
    ("at", "night"),
    [
        ("2026-11-28T03:05:00+01:00", "2026-11-28"),  # the slot begins the night
        ("2026-11-28T03:04:59+01:00", "2026-11-27"),  # a moment before: still the night before
        ("2026-11-28T14:00:00+01:00", "2026-11-28"),  # the day belongs to the night before it
        ("2026-11-29T02:30:00+01:00", "2026-11-28"),
        ("2026-11-28T02:06:00+00:00", "2026-11-28"),  # 03:06 in Amsterdam, given in UTC
        ("2027-03-28T03:05:00+02:00", "2027-03-28"),  # spring forward: the slot exists, an hour shorter night
        ("2027-03-28T02:30:00+01:00", "2027-03-28"),  # = 03:30 CEST, after that night's slot
        ("2027-10-31T03:04:00+01:00", "2027-10-30"),  # autumn: 03:04 after the repeated hour, before the slot
    ],
)
def test_a_moment_belongs_to_the_last_night_whose_slot_passed(at: str, night: str) -> None:
    from taskzilla_sleep.night.schedule import calendar_night

    assert calendar_night(datetime.fromisoformat(at), ScheduleSettings()) == night
    # Another zone, another calendar: 03:05 in Amsterdam is 21:05 the day before in New York.
    ny = ScheduleSettings(timezone="America/New_York")
    assert calendar_night(datetime.fromisoformat("2026-11-28T03:05:00+01:00"), ny) == "2026-11-27"
