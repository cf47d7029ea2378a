"""The report as plain text for a terminal: verdicts, sparkline trends and per-night tables.

What `taskzilla-sleep report` prints (without ``--json``); it fits a terminal and a chat paste,
so trends are sparklines and every table lines its figures up on the right.
"""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from taskzilla_sleep.core.models import STEP_NAMES
from taskzilla_sleep.observe.report.formats import (
    SIZE_KEYS,
    before_after,
    day,
    duration,
    number,
    step_cell,
    step_seconds,
    when,
)
from taskzilla_sleep.observe.report.model import Report
from taskzilla_sleep.observe.report.nights import COUNT_KEYS

SPARKS = "▁▂▃▄▅▆▇█"


def render_text(report: Report) -> str:
    tz = ZoneInfo(report.timezone)
    nights = report.nights
    lines: list[str] = []
    if nights:
        span = f"{day(nights[0].now, tz)} … {day(nights[-1].now, tz)}"
        lines.append(f"taskzilla-sleep report: {len(nights)} runs ({span}), times in {report.timezone}")
    else:
        lines.append(f"taskzilla-sleep report: no runs in the ledger (asked for the last {report.runs_requested})")
    lines.append("")
    lines.append(f"health (worst: {report.worst})")
    width = max(len(s.title) for s in report.signals) if report.signals else 0
    for s in report.signals:
        lines.append(f"  [{s.verdict:<7}] {s.title:<{width}}  {s.reason}")
    if not nights:
        return "\n".join(lines)

    lines += ["", "trends, oldest → newest"]
    for label, values, unit in report.series():
        known = [v for v in values if v is not None]
        if not known:
            continue
        lines.append(
            f"  {label:<21} {sparkline(values)}  {number(known[0], unit)} → {number(known[-1], unit)}"
            f"  (min {number(min(known), unit)}, max {number(max(known), unit)})"
        )
    lag = (
        f"pattern availability lag over the window: p50 {duration(report.lag_p50_s)}, p95 {duration(report.lag_p95_s)}"
    )
    lines += [
        "",
        lag,
        f"pinned facts {report.pinned_facts}, open contradictions {report.open_contradictions} "
        f"({report.open_updates} changes to confirm, {report.open_contradictions - report.open_updates} disagreements)",
    ]

    lines += ["", "what each night did"]
    lines += table(
        ["night", "trigger", "status", "+pat", "bumps", "merges", "contra", "absorb", "retire", "prune"],
        [
            [
                when(x.now, tz),
                x.trigger,
                x.status,
                *[str(getattr(x, c)) for c in COUNT_KEYS],  # the header follows COUNT_KEYS' order
            ]
            for x in nights
        ],
        text_columns=3,
    )
    lines += ["", "what it cost (seconds per step; FAIL/skip/— = failed, skipped, not run)"]
    lines += table(
        ["night", *STEP_NAMES, "total", "LLM calls", "tokens in/out", "cost $", "lag p50", "lag p95"],
        [
            [
                when(x.now, tz),
                *[step_cell(x.step(st)) for st in STEP_NAMES],
                step_seconds(x.duration_s),
                str(x.llm_calls),
                f"{x.prompt_tokens:,}/{x.completion_tokens:,}",
                "unknown" if x.cost_usd is None else f"{x.cost_usd:.4f}",
                duration(x.lag_p50_s),
                duration(x.lag_p95_s),
            ]
            for x in nights
        ],
        text_columns=1,
    )
    lines += ["", "store sizes, before → after"]
    lines += table(
        ["night", "messages", "live episodes", "live patterns", "open contra", "tombstones", "archived texts"],
        [[when(x.now, tz), *[before_after(x, k) for k in SIZE_KEYS]] for x in nights],
        text_columns=1,
    )
    unread = [(x, s.counts) for x in nights for s in [x.step("distill")] if s is not None and s.counts.get("unread")]
    if unread:
        lines += ["", "not read (the offline judgement reads English only; configure a model: llm.model)"]
        lines += [
            f"  {when(x.now, tz)} {c['unread']} of the {c.get('shown', 0)} messages shown to distill "
            f"({c['unread'] / max(1, c.get('shown', 0)):.0%})"
            for x, c in unread
        ]
    deferred = [(x, line) for x in nights for line in x.deferred]
    if deferred:
        lines += ["", "deferred (the LLM budget or the window ran out; taken first the next night)"]
        lines += [f"  {when(x.now, tz)} {line}" for x, line in deferred]
    errors = [(x, s) for x in nights for s in x.steps if s.error]
    if errors:
        lines += ["", "errors"]
        lines += [f"  {when(x.now, tz)} {s.step}: {s.error}" for x, s in errors]
    return "\n".join(lines)


def sparkline(values: Sequence[float | None]) -> str:
    """▁▂▃▄▅▆▇█ scaled between the series' min and max; a gap (None) is a space."""
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    lo, hi = min(known), max(known)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi == lo:
            # A flat series shows as flat; the middle bar says "non-zero" without inventing a trend.
            out.append(SPARKS[0] if hi == 0 else SPARKS[3])
        else:
            out.append(SPARKS[min(len(SPARKS) - 1, int((v - lo) / (hi - lo) * (len(SPARKS) - 1) + 0.5))])
    return "".join(out)


def table(header: list[str], rows: list[list[str]], text_columns: int) -> list[str]:
    """A header, a rule and the rows; the first ``text_columns`` are text (left-aligned), figures line up right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: list[str]) -> str:
        return "  " + "  ".join(
            c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return [fmt(header), "  " + "  ".join("─" * w for w in widths), *[fmt(r) for r in rows]]
