"""The API while a large batch is stored: probe and recall latency during one big POST /v1/episodes.

    python -m ops.bench.api_latency [--episodes 5000] [--rounds 3] [--json OUT]

A worker (embedded FalkorDB + Chroma, the demo's defaults) serves its API on 127.0.0.1. Each round
POSTs ``--episodes`` new episodes in one request and, while it is in flight, calls ``/healthz``,
``/metrics`` and ``/v1/recall`` one after the other (a 20 ms pause between rounds of three). The
same calls on the idle server first give the baseline. Prints the machine, the command, per-path
median / p95 / max in ms, how many calls ran during the ingest, and the ingest's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from ops.bench.run import machine
from taskzilla_sleep.app import build
from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
PATHS = ("/healthz", "/metrics", "/v1/recall?" + urllib.parse.urlencode({"q": "release train staging soak", "k": 5}))


def _episodes(n: int, round_no: int) -> list[dict[str, Any]]:
    return [
        {
            "team": "platform",
            "channel": f"c{i % 7}",
            "author": f"p{i % 31}",
            "text": f"round {round_no} message {i}: the release train leaves after the staging soak of {i % 13} h",
            "ts": "2026-11-28T08:00:00+01:00",
            "provenance": "human",
        }
        for i in range(n)
    ]


SLOW: list[tuple[str, str, float]] = []  # (wall time, path, ms) of calls over 250 ms


def _call(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    ms = (time.perf_counter() - started) * 1000
    if ms > 250:
        SLOW.append((datetime.now().strftime("%H:%M:%S.%f")[:-3], url.split("/", 3)[-1][:20], ms))
    return ms


def _stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(ms), "median": statistics.median(ms), "p95": p95, "max": ordered[-1]}


def run(episodes: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tz-api-bench-") as tmp:
        settings = load_settings(
            env={"TASKZILLA_DATA_DIR": tmp},
            overrides={"api.default_team": "platform", "api.max_body_bytes": 64 * 1024 * 1024},
        )
        with build(settings) as services:
            worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
            url = worker.start_api()
            assert url is not None
            try:
                return _measure(url, episodes, rounds)
            finally:
                if worker._server is not None:
                    worker._server.should_exit = True
                if worker._api_thread is not None:
                    worker._api_thread.join(timeout=10)


def _measure(url: str, episodes: int, rounds: int) -> dict[str, Any]:
    idle: dict[str, list[float]] = {p: [] for p in PATHS}
    busy: dict[str, list[float]] = {p: [] for p in PATHS}
    ingest_s: list[float] = []
    for p in PATHS:  # warm up (the embedding model, the recall path)
        _call(url + p)
    for r in range(rounds):
        for _ in range(20):
            for p in PATHS:
                idle[p].append(_call(url + p))
        data = json.dumps({"episodes": _episodes(episodes, r)}).encode()
        answer: dict[str, Any] = {}

        def ingest(body: bytes = data, out: dict[str, Any] = answer) -> None:
            req = urllib.request.Request(
                url + "/v1/episodes", data=body, method="POST", headers={"content-type": "application/json"}
            )
            started = time.perf_counter()
            with urllib.request.urlopen(req, timeout=1800) as resp:
                out.update(json.loads(resp.read()))
            ingest_s.append(time.perf_counter() - started)

        t = threading.Thread(target=ingest)
        t.start()
        time.sleep(0.2)  # the body is parsed; the ingest runs in its thread
        while t.is_alive():
            for p in PATHS:
                busy[p].append(_call(url + p))
            time.sleep(0.02)
        t.join()
        assert answer.get("new") == episodes, answer
    return {
        "episodes": episodes,
        "rounds": rounds,
        "ingest_s": ingest_s,
        "idle": {p: _stats(v) for p, v in idle.items()},
        "during_ingest": {p: _stats(v) for p, v in busy.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--log-level", default="warning")
    a = ap.parse_args(argv)
    configure_logging(level=a.log_level, json=False)
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, Python {info['python']}")
    print("command: python -m ops.bench.api_latency " + " ".join(argv if argv is not None else sys.argv[1:]))
    out = run(a.episodes, a.rounds)
    ingest = ", ".join(f"{s:.1f}" for s in out["ingest_s"])
    print(f"\n{a.episodes} episodes per POST, {a.rounds} rounds; ingest wall time per round: {ingest} s\n")
    print("| path | idle median ms | during ingest: calls | median ms | p95 ms | max ms |")
    print("|---|---|---|---|---|---|")
    for p in PATHS:
        i, b = out["idle"][p], out["during_ingest"][p]
        name = p.split("?")[0]
        print(f"| {name} | {i['median']:.1f} | {b['n']} | {b['median']:.1f} | {b['p95']:.1f} | {b['max']:.1f} |")
    if SLOW:
        print(f"\ncalls over 250 ms (wall time, path, ms): {len(SLOW)}")
        for when, path, ms in SLOW[:20]:
            print(f"  {when} {path} {ms:.0f}")
    if a.json is not None:
        a.json.write_text(json.dumps(out | {"machine": info}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
