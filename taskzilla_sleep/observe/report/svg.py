"""Inline SVG charts for the HTML report: line, grouped-bar and stacked-bar charts over the runs.

Written by hand rather than with a plotting library: the page must open from disk with no script
and no network, and the charts are simple enough that a few hundred bytes of SVG each do it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Literal

from taskzilla_sleep.observe.report.formats import number

ChartSeries = list[tuple[str, list[float | None], str]]  # (name, values oldest first, colour)
ChartKind = Literal["line", "bar", "stacked"]

# Steps a person reads on a time axis: seconds, then whole minutes, then whole hours.
TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def axis_ticks(peak: float, integer: bool = True, seconds: bool = False) -> list[float]:
    """Round y-axis ticks from 0 to at or above ``peak``, about 4 of them.

    Steps are 1, 2, 2.5 or 5 × 10^k; counts get whole-number steps only (no "3.75 merges"); a time
    axis past two minutes steps in whole minutes or hours (no "33m").
    """
    if peak <= 0:
        return [0.0, 1.0]
    raw = peak / 4
    if seconds and raw > 30:
        step = float(next((t for t in TIME_STEPS if t >= raw), math.ceil(raw / 86400) * 86400))
    else:
        mag: float = 10.0 ** math.floor(math.log10(raw))
        candidates = [m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0)]
        if integer:
            candidates = [c for c in candidates if c >= 1 and float(c).is_integer()] or [1.0]
        step = next((c for c in candidates if c >= raw * (1 - 1e-9)), candidates[-1])
    count = max(1, math.ceil(peak / step - 1e-9))
    return [step * k for k in range(count + 1)]


def axis_label(v: float, unit: str) -> str:
    """A y-axis tick: short (12k, 15m, 2h), since the axis has little room."""
    if unit == "s":
        if v == 0:
            return "0"
        return f"{v:g}s" if v < 60 else f"{v / 60:g}m" if v < 3600 else f"{v / 3600:g}h"
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    return f"{v:g}"


def svg_chart(
    labels: Sequence[str],
    series: ChartSeries,
    kind: ChartKind,
    unit: str = "",
    width: int = 560,
    height: int = 210,
) -> str:
    """An inline SVG chart: a line chart, grouped bars or stacked bars over the runs."""
    left, right, top, bottom = 54, 10, 10, 38
    pw, ph = width - left - right, height - top - bottom
    n = len(labels)
    head = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img">'
    if kind == "stacked":
        totals = [sum(v[i] or 0.0 for _, v, _ in series) for i in range(n)]
        peak = max(totals, default=0.0)
    else:
        peak = max((v for _, vals, _ in series for v in vals if v is not None), default=0.0)
    if n == 0 or not any(v is not None for _, vals, _ in series for v in vals):
        return head + f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>'
    ticks = axis_ticks(peak, integer=unit != "s", seconds=unit == "s")
    top_v = ticks[-1]

    def ys(value: float) -> float:
        return top + ph - (value / top_v) * ph

    out = [head]
    for tick in ticks:
        y = ys(tick)
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{html.escape(axis_label(tick, unit))}</text>'
        )
    out.append(f'<line class="axis" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}"/>')
    if peak == 0:
        # Say it: an empty-looking chart reads as "broken" unless it says the figures were zero.
        out.append(f'<text class="empty" x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle">')
        out.append("all zero in this window</text>")
    slot = pw / n
    every = max(1, math.ceil(n / 12))  # at most ~12 x labels, whatever the window
    for i, lab in enumerate(labels):
        if i % every == 0 or i == n - 1:
            x = left + slot * (i + 0.5)
            date, _, clock = lab.partition(" ")
            out.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle">{html.escape(date)}</text>')
            out.append(f'<text x="{x:.1f}" y="{top + ph + 28}" text-anchor="middle">{html.escape(clock)}</text>')
    if kind == "line":
        for name, vals, color in series:
            pts = [(left + slot * (i + 0.5), ys(v), v, i) for i, v in enumerate(vals) if v is not None]
            segs: list[list[tuple[float, float]]] = [[]]
            for i, v in enumerate(vals):
                if v is None:
                    segs.append([])
                else:
                    segs[-1].append((left + slot * (i + 0.5), ys(v)))
            for seg in segs:
                if len(seg) > 1:
                    d = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
                    out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2.2" points="{d}"/>')
            for x, y, v, i in pts:
                tip = html.escape(f"{name} {labels[i]}: {number(v, unit)}")
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{color}"><title>{tip}</title></circle>')
    else:
        inner = slot * 0.72
        for i in range(n):
            x0 = left + slot * i + (slot - inner) / 2
            base = 0.0
            for j, (name, vals, color) in enumerate(series):
                v = vals[i]
                if v is None or v <= 0:
                    continue
                tip = html.escape(f"{name} {labels[i]}: {number(v, unit)}")
                if kind == "stacked":
                    y1, y0 = ys(base + v), ys(base)
                    base += v
                    bx, bw = x0, inner
                else:
                    bw = inner / len(series)
                    bx, y1, y0 = x0 + j * bw, ys(v), ys(0.0)
                out.append(
                    f'<rect x="{bx:.1f}" y="{y1:.1f}" width="{max(bw - 1, 1):.1f}" height="{max(y0 - y1, 0.8):.1f}" '
                    f'fill="{color}" rx="1"><title>{tip}</title></rect>'
                )
    out.append("</svg>")
    return "".join(out)
