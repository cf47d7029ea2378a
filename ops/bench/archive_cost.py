"""What the archive costs (BENCHMARKS.md, "The archive"): bytes per retired message, and night time
with the archive on (``decay.archive_days`` 30) and off (0), side by side in one run.

    python -m ops.bench.archive_cost [--pairs falkordb,neo4j] [--days 10] [--per-day 2000] [--out DIR]

The busy synthetic team of ``generate.py`` (``--per-day`` messages a day), day by day: ingest the day,
then the full night (offline provider: no model latency, so a night's time is the worker's and the
stores'). Each setting gets fresh stores; both settings of a pair run back to back, alternating by
day, so the machine's load falls on both alike. Reported per night: wall time (median over the nights
after the first three, when decay starts retiring), and at the end: archive items, message texts and
bytes, retired and pruned messages, bytes per retired message.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from contextlib import ExitStack
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from ops.bench.generate import generate
from ops.bench.scenario import TZ, backend_settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"on": 30.0, "off": 0.0}


def _services(pair_overrides: dict[str, Any], data: Path, archive_days: float) -> Any:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.core.settings import load_settings

    overrides = dict(pair_overrides) | {"decay.archive_days": archive_days}
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(data)}, overrides=overrides)
    return build(settings)


def run_pair(pair: str, days: int, per_day: int, work: Path) -> dict[str, Any]:
    from taskzilla_sleep.night.pipeline import NightRequest, run_night

    gen = generate(days=days, per_day=per_day, start=date(2026, 10, 12))
    by_day: dict[str, list[dict[str, Any]]] = {}
    for e in gen.episodes:
        by_day.setdefault(e["ts"][:10], []).append(e)
    out: dict[str, Any] = {"pair": pair, "nights_s": {k: [] for k in SETTINGS}}
    with ExitStack() as stack:
        pair_overrides = stack.enter_context(backend_settings(pair, work / "servers"))
        services = {
            name: stack.enter_context(_services(pair_overrides, work / name, days_kept))
            for name, days_kept in SETTINGS.items()
        }
        for s in services.values():
            s.graph.delete_all()
            s.vectors.delete_all()
            s.graph.ensure_schema()
        for i, day in enumerate(sorted(by_day)):
            d = date.fromisoformat(day)
            night = datetime(d.year, d.month, d.day, 3, 5, tzinfo=TZ) + timedelta(days=1)
            lines = [json.dumps(e) for e in by_day[day]]
            order = list(services) if i % 2 == 0 else list(reversed(services))
            for name in order:
                s = services[name]
                s.ingestor(clock=lambda n=night: n - timedelta(hours=3)).ingest_lines(lines, f"day {day}")
                t0 = time.perf_counter()
                result = run_night(s, NightRequest(now=night, trigger="manual"))
                out["nights_s"][name].append(round(time.perf_counter() - t0, 3))
                if not result.ok:
                    raise SystemExit(f"{pair} {name} night {night} failed: {[x.error for x in result.run.steps]}")
        for name, s in services.items():
            c = s.graph.counts()
            out[name] = {
                "episodes": sum(c.episodes.values()),
                "retired": c.episodes.get("retired", 0),
                "pruned": c.episodes.get("pruned", 0),
                "archived_items": c.archived_items,
                "archived_texts": c.archived_texts,
                "archived_bytes": c.archived_bytes,
            }
    on = out["on"]
    gone = on["retired"] + on["pruned"]
    out["bytes_per_retired"] = round(on["archived_bytes"] / gone, 1) if gone else None
    out["bytes_per_episode"] = round(on["archived_bytes"] / on["episodes"], 1) if on["episodes"] else None
    later = {k: v[3:] or v for k, v in out["nights_s"].items()}
    out["night_median_s"] = {k: round(statistics.median(v), 3) for k, v in later.items()}
    off = out["night_median_s"]["off"]
    out["night_ratio"] = round(out["night_median_s"]["on"] / off, 3) if off else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the archive's cost: bytes per retired message, night time on/off")
    ap.add_argument("--pairs", default="falkordb,neo4j")
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--per-day", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=ROOT / ".tmp" / "bench" / "archive")
    a = ap.parse_args(argv)
    pairs = {"falkordb": "falkordb+chroma-embedded", "neo4j": "neo4j+chroma-server"}
    a.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.node()} {platform.machine()} python {platform.python_version()}")
    print("command: python -m ops.bench.archive_cost " + shlex.join(sys.argv[1:] if argv is None else argv))
    results = []
    for name in a.pairs.split(","):
        r = run_pair(pairs[name], a.days, a.per_day, a.out / name)
        results.append(r)
        print(
            f"{r['pair']}: night median {r['night_median_s']['on']} s with the archive, "
            f"{r['night_median_s']['off']} s without (x{r['night_ratio']}); "
            f"archive {r['on']['archived_items']} items, {r['on']['archived_texts']} texts, "
            f"{r['on']['archived_bytes']} bytes; {r['on']['retired']} retired + {r['on']['pruned']} pruned "
            f"of {r['on']['episodes']} messages: {r['bytes_per_retired']} bytes per retired message, "
            f"{r['bytes_per_episode']} per message stored",
            flush=True,
        )
    (a.out / "archive_cost.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
