"""How the report writes a figure for a person: counts, durations, clock times, step cells, size changes.

Shared by the text view, the HTML tables and the SVG charts' tooltips, so a figure reads the same
in the terminal and in the browser.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from taskzilla_sleep.observe.report.nights import Night, StepFigures

# The store sizes the per-night tables show before → after, in column order.
SIZE_KEYS = (
    "episodes_total",
    "vectors_episodes",
    "patterns_live",
    "contradictions_open",
    "tombstones",
    "archived_texts",  # retired or pruned messages the archive still holds (undo, patterns release)
)


def number(v: float | None, unit: str) -> str:
    """A count with thousands separators, a fraction to two or one decimals; ``unit`` "s" is a duration."""
    if v is None:
        return "—"
    if unit == "s":
        return duration(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def step_seconds(s: float | None) -> str:
    """Step durations in a table column: always seconds, so the column compares at a glance."""
    if s is None:
        return "—"
    return f"{s:.2f}" if s < 10 else f"{s:.1f}" if s < 100 else f"{s:,.0f}"


def duration(s: float | None) -> str:
    """Seconds as a person reads them: 0.42s, 38s, 12m, 3.5h."""
    if s is None:
        return "—"
    if s < 10:
        return f"{s:.2f}s"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def when(t: datetime, tz: ZoneInfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def day(t: datetime, tz: ZoneInfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d")


def step_cell(s: StepFigures | None) -> str:
    """A step in a per-night table: its seconds when it ran, else what became of it."""
    if s is None:
        return "—"
    if s.status == "ok":
        return step_seconds(s.duration_s)
    if s.status == "failed":
        return "FAIL " + step_seconds(s.duration_s)
    if s.status == "skipped":
        return "skip"
    if s.status == "deferred":
        return "defer " + step_seconds(s.duration_s)
    return s.status


def before_after(x: Night, key: str) -> str:
    """A store size around the run, "1,200 → 1,180"; "?" for a side the ledger did not record."""
    before = x.sizes_before.get(key, x.sizes_before.get("episodes_live") if key == "vectors_episodes" else None)
    after = x.size(key)
    if before is None and after is None:
        return "—"
    return f"{'?' if before is None else f'{before:,}'} → {'?' if after is None else f'{after:,}'}"
