"""The report as one static HTML page: verdict cards, last-run figures, SVG trend charts, per-night tables.

The page is self-contained (inline CSS and SVG, no script, no network) so an operator opens it from
disk, or from a mounted data dir, without a server; `taskzilla-sleep report` writes it every time.
"""

from __future__ import annotations

import html
from pathlib import Path
from zoneinfo import ZoneInfo

from taskzilla_sleep.core.models import STEP_NAMES, StepName
from taskzilla_sleep.observe.report.formats import SIZE_KEYS, before_after, day, duration, number, step_cell, when
from taskzilla_sleep.observe.report.model import Report
from taskzilla_sleep.observe.report.nights import Night
from taskzilla_sleep.observe.report.svg import ChartKind, ChartSeries, svg_chart

COLORS = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563")
STEP_COLORS: dict[StepName, str] = {"prune": "#64748b", "distill": "#2563eb", "reflect": "#9333ea", "decay": "#d97706"}

CSS = """
:root { --ok: #1a7f37; --watch: #b7791f; --bad: #cf222e; --unknown: #6e7781; --ink: #1f2328; --muted: #59636e;
  --line: #d1d9e0; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: var(--bg); }
header { background: #0d1117; color: #f0f6fc; padding: 18px 28px; display: flex; align-items: baseline;
  justify-content: space-between; flex-wrap: wrap; gap: 8px; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header .meta { color: #9198a1; font-size: 13px; }
main { padding: 20px 28px 40px; max-width: 1400px; margin: 0 auto; }
h2 { font-size: 15px; margin: 26px 0 10px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.overall { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-size: 13px;
  font-weight: 600; margin-left: 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-left: 6px solid var(--unknown); border-radius: 6px;
  padding: 10px 14px; }
.card .head { display: flex; justify-content: space-between; align-items: center; gap: 8px; }
.card .title { font-weight: 600; }
.card .reason { color: var(--muted); font-size: 13px; margin-top: 4px; }
.badge { font-size: 11px; font-weight: 700; text-transform: uppercase; padding: 1px 8px; border-radius: 10px;
  color: #fff; background: var(--unknown); }
.v-ok { border-left-color: var(--ok); } .b-ok { background: var(--ok); }
.v-watch { border-left-color: var(--watch); } .b-watch { background: var(--watch); }
.v-bad { border-left-color: var(--bad); } .b-bad { background: var(--bad); }
.v-unknown { border-left-color: var(--unknown); } .b-unknown { background: var(--unknown); }
.kpis { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; }
.kpi { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
.kpi .label { color: var(--muted); font-size: 12px; }
.kpi .value { font-size: 22px; font-weight: 600; }
.kpi .sub { color: var(--muted); font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 14px; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px 8px; }
.chart h3 { margin: 0 0 4px; font-size: 14px; }
.chart svg { width: 100%; height: auto; display: block; }
.legend { font-size: 12px; color: var(--muted); display: flex; flex-wrap: wrap; gap: 12px; margin-top: 2px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
svg .grid { stroke: #eaeef2; stroke-width: 1; }
svg .axis { stroke: #afb8c1; stroke-width: 1; }
svg text { font-size: 11px; fill: #59636e; font-family: inherit; }
svg .empty { font-size: 13px; fill: #8c959f; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); font-size: 13px; }
th, td { padding: 5px 8px; border-bottom: 1px solid #eaeef2; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; font-weight: 600; color: var(--muted); }
td.l, th.l { text-align: left; }
tr.failed td { background: #ffebe9; }
td.fail { color: var(--bad); font-weight: 600; }
td.dim { color: #8c959f; }
td.st-ok { color: var(--ok); font-weight: 600; } td.st-failed { color: var(--bad); font-weight: 600; }
td.st-incomplete { color: var(--watch); font-weight: 600; }
.scroll { overflow-x: auto; }
footer { color: var(--muted); font-size: 12px; margin-top: 28px; }
"""


def write_html(report: Report, path: Path) -> Path:
    """One self-contained static page (inline CSS and SVG, no script, no network); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(report), encoding="utf-8")
    tmp.replace(path)  # atomic: a browser refreshing the page never reads half a file
    return path


def render_html(report: Report) -> str:
    tz = ZoneInfo(report.timezone)
    nights = report.nights
    e = html.escape
    worst = report.worst
    window = f"{len(nights)} runs, {day(nights[0].now, tz)} … {day(nights[-1].now, tz)}" if nights else "no runs yet"
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/>',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
        f"<title>taskzilla-sleep report: {e(worst)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>taskzilla-sleep · consolidation report</h1>",
        f'<div class="meta">{e(window)} · times in {e(report.timezone)} · generated '
        f"{e(report.generated_at.astimezone(tz).strftime('%Y-%m-%d %H:%M'))}</div></header><main>",
    ]
    parts += report_sections(report)
    parts.append(
        "<footer>Verdicts: ok · watch (look at it this week) · bad (act now; the report exits 1) · unknown (not "
        "enough data). Source: the run ledger in the graph store. Healthy: the store grows with patterns, not with "
        "messages; fewer merges each run; a stable memory index; pinned facts untouched (ops/runbook.md, "
        "“Is it healthy?”).</footer></main></body></html>"
    )
    return "\n".join(parts)


def report_sections(report: Report) -> list[str]:
    """The page's content without its frame (verdict cards, last run, charts, tables): the static page
    and the worker's memory console (/ui/nights) both show these, styled by ``CSS``."""
    tz = ZoneInfo(report.timezone)
    nights = report.nights
    # The charts' x axis is the time their labels show (each night's clock), left to right: the ledger
    # orders nights by when their runs started, which a catch-up, a backfill (run-once --now) or a
    # demo night run after later nights puts out of clock order.
    order = sorted(range(len(nights)), key=lambda i: (nights[i].now, i))
    labels = [nights[i].now.astimezone(tz).strftime("%m-%d %H:%M") for i in order]
    e = html.escape
    worst = report.worst
    parts = [f'<h2>Health <span class="overall b-{worst}">{e(worst)}</span></h2><div class="cards">']
    for s in report.signals:
        parts.append(
            f'<div class="card v-{s.verdict}"><div class="head"><span class="title">{e(s.title)}</span>'
            f'<span class="badge b-{s.verdict}">{e(s.verdict)}</span></div>'
            f'<div class="reason">{e(s.reason)}</div></div>'
        )
    parts.append("</div>")
    if nights:
        parts.append(_kpis(report))
        parts.append('<h2>Trends</h2><div class="charts">')
        parts += _charts(report, labels, order)
        parts.append("</div>")
        parts.append(_nights_table(report, tz))
    return parts


def _kpis(report: Report) -> str:
    last = report.nights[-1]
    items = [
        ("last run", last.status, f"{last.trigger}, {duration(last.duration_s)}"),
        ("live patterns", number(last.size("patterns_live"), ""), f"{last.patterns_added} added last run"),
        ("live episodes", number(last.size("vectors_episodes"), ""), f"{last.retired} retired last run"),
        (
            "open contradictions",
            str(report.open_contradictions),
            f"{report.open_updates} changes to confirm; {last.contradictions_opened} opened last run",
        ),
        ("pattern lag p50 / p95", f"{duration(report.lag_p50_s)} / {duration(report.lag_p95_s)}", "over the window"),
        (
            "LLM last run",
            f"{last.llm_calls} calls",
            f"{last.tokens:,} tokens, " + ("cost unknown" if last.cost_usd is None else f"${last.cost_usd:.4f}"),
        ),
    ]
    cells = "".join(
        f'<div class="kpi"><div class="label">{html.escape(a)}</div><div class="value">{html.escape(b)}</div>'
        f'<div class="sub">{html.escape(c)}</div></div>'
        for a, b, c in items
    )
    return f'<h2>Last run</h2><div class="kpis">{cells}</div>'


def _charts(report: Report, labels: list[str], order: list[int]) -> list[str]:
    """The trend charts over ``labels``; ``order``: the nights' indexes in clock order (the x axis)."""
    n = report.nights
    size = {lbl: vals for lbl, vals, _ in report.series()}
    charts: list[tuple[str, ChartKind, ChartSeries, str]] = [
        (
            "Store size after each run (linear in patterns, not in messages)",
            "line",
            [
                ("messages stored", size["messages stored"], COLORS[6]),
                ("live episode vectors", size["live episode vectors"], COLORS[0]),
                ("live patterns", size["live patterns"], COLORS[1]),
            ],
            "",
        ),
        (
            "What each run did",
            "bar",
            [
                ("patterns added", [float(x.patterns_added) for x in n], COLORS[0]),
                ("evidence bumps", [float(x.evidence_bumps) for x in n], COLORS[5]),
                ("merges", [float(x.merges) for x in n], COLORS[3]),
                ("contradictions opened", [float(x.contradictions_opened) for x in n], COLORS[4]),
            ],
            "",
        ),
        (
            "Episodes leaving the live store",
            "bar",
            [
                ("absorbed", [float(x.absorbed) for x in n], COLORS[0]),
                ("retired", [float(x.retired) for x in n], COLORS[2]),
                ("pruned", [float(x.pruned) for x in n], COLORS[6]),
            ],
            "",
        ),
        (
            "Duration per step",
            "stacked",
            [(st, [_step_duration(x, st) for x in n], STEP_COLORS[st]) for st in STEP_NAMES],
            "s",
        ),
        (
            "LLM tokens per run",
            "stacked",
            [
                ("prompt", [float(x.prompt_tokens) for x in n], COLORS[0]),
                ("completion", [float(x.completion_tokens) for x in n], COLORS[2]),
            ],
            "",
        ),
        (
            "Pattern availability lag",
            "line",
            [("p50", [x.lag_p50_s for x in n], COLORS[0]), ("p95", [x.lag_p95_s for x in n], COLORS[4])],
            "s",
        ),
        ("Open contradictions", "line", [("open", size["open contradictions"], COLORS[4])], ""),
    ]
    if "memory index entries" in size:
        charts.append(("Memory index entries", "line", [("entries", size["memory index entries"], COLORS[1])], ""))
    out = []
    for title, kind, unordered, unit in charts:
        series = [(name, [vals[i] for i in order], color) for name, vals, color in unordered]
        legend = "".join(f'<span><i style="background:{c}"></i>{html.escape(name)}</span>' for name, _, c in series)
        out.append(
            f'<div class="chart"><h3>{html.escape(title)}</h3>{svg_chart(labels, series, kind, unit)}'
            f'<div class="legend">{legend}</div></div>'
        )
    return out


def _step_duration(x: Night, step: StepName) -> float | None:
    s = x.step(step)
    return s.duration_s if s is not None else None


def _nights_table(report: Report, tz: ZoneInfo) -> str:
    """Two tables (what each run did; what it cost and left behind), newest first: the run an operator asks
    about is on top, and each fits a laptop screen without scrolling sideways."""
    e = html.escape
    did = {
        "+patterns": "patterns added",
        "bumps": "evidence bumps on existing patterns",
        "merges": "duplicate patterns merged",
        "contra": "contradictions opened",
        "absorbed": "episodes absorbed into patterns",
        "retired": "absorbed episodes retired by decay",
        "pruned": "stale episodes pruned",
    }
    head1 = (
        '<h2>Runs: seconds per step and what changed</h2><div class="scroll"><table><tr><th class="l">night</th>'
        '<th class="l">trigger</th><th class="l">status</th>'
        + "".join(f'<th title="{s}: seconds">{s}</th>' for s in STEP_NAMES)
        + "<th>total</th>"
        + "".join(f'<th title="{e(long)}">{e(c)}</th>' for c, long in did.items())
        + "</tr>"
    )
    head2 = (
        '<h2>Runs: LLM, lag and store sizes (before → after)</h2><div class="scroll"><table><tr>'
        '<th class="l">night</th><th>LLM calls</th><th>tokens in / out</th><th>cost $</th><th>lag p50</th>'
        "<th>lag p95</th><th>messages</th><th>live episodes</th><th>live patterns</th><th>open contradictions</th>"
        '<th>tombstones</th><th title="retired or pruned messages whose text the archive holds (undo)">archived'
        " texts</th></tr>"
    )
    rows1, rows2 = [], []
    for x in reversed(report.nights):
        night = f'<td class="l">{e(when(x.now, tz))}</td>'
        cells = [night, f'<td class="l">{e(x.trigger)}</td>', f'<td class="l st-{x.status}">{e(x.status)}</td>']
        for st in STEP_NAMES:
            s = x.step(st)
            cls = "fail" if s is not None and s.status == "failed" else "dim" if s is None or s.status != "ok" else ""
            tip = f' title="{e(s.error)}"' if s is not None and s.error else ""
            cells.append(f'<td class="{cls}"{tip}>{e(step_cell(s))}</td>')
        cells.append(f"<td>{e(duration(x.duration_s))}</td>")
        counts = [x.patterns_added, x.evidence_bumps, x.merges, x.contradictions_opened, x.absorbed, x.retired]
        cells += [f'<td class="{"" if v else "dim"}">{v}</td>' for v in [*counts, x.pruned]]
        rows1.append(f'<tr class="{"failed" if x.status == "failed" else ""}">{"".join(cells)}</tr>')
        if x.deferred:  # what the budget or the window left: a row of its own under the night
            left = "; ".join(x.deferred)
            rows1.append(f'<tr class="deferred"><td class="l dim" colspan="{len(cells)}">deferred: {e(left)}</td></tr>')
        figures = [
            str(x.llm_calls),
            f"{x.prompt_tokens:,} / {x.completion_tokens:,}",
            "unknown" if x.cost_usd is None else f"{x.cost_usd:.4f}",
            duration(x.lag_p50_s),
            duration(x.lag_p95_s),
            *[before_after(x, k) for k in SIZE_KEYS],
        ]
        rows2.append("<tr>" + night + "".join(f"<td>{e(v)}</td>" for v in figures) + "</tr>")
    return head1 + "".join(rows1) + "</table></div>" + head2 + "".join(rows2) + "</table></div>"
