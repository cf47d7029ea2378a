"""The scale bench (issue 15 part 4): many teams, one night, 1, 2 and 4 worker replicas.

    python -m ops.bench.scale [--teams 500] [--workers 1,2,4] [--quick] [--no-kill | --kill-only]
                              [--llm-latency 0.5-2.0] [--team-concurrency 1] [--out .tmp/bench]

What it does, on this machine:

1. generates ``--teams`` teams (``scale_parts.team_mix``: 2 % busy, 18 % medium, 80 % quiet; one day
   of ``generate.py``'s synthetic messages each) into one JSONL file;
2. starts Neo4j (tests/neo4j_service.py) and a Chroma server (tests/chroma_service.py), and the
   OpenAI-compatible LLM stub (tests/llm_stub.py, ``ops/bench/model.py`` answering) with a latency
   drawn uniformly from ``--llm-latency`` seconds per chat call;
3. for each worker count N (and then once more with 2 workers, killing one mid-night): empties the
   stores, ingests the file (``taskzilla-sleep ingest``), starts N ``taskzilla-sleep worker``
   processes on a controlled clock at speed 1 (``--clock-start``), each clock set so they agree, the
   night's four slots all at 03:05 (so the night is one stretch of real time, not four waits), the
   watchdog off; waits until every team's four steps are done in the ledger, then stops them;
4. measures: night wall time (first step start to last step end, over the ledger), worker CPU
   (/proc/<pid>/stat, from the clock's 03:05 to the night's end) per team, peak RSS per worker,
   speed-up against one worker (in this run), recall p50/p95 of a client asking one worker
   ``/v1/recall`` before and during the night, and in the kill run the hand-over time: from the
   ``kill -9`` of the replica holding a team to the other replica holding it;
5. prints the machine, the command and the figures, and writes ``OUT/scale.json``.

The window: the night's slots run from 03:05 to the window's end at 03:25 (``schedule.window_end``;
past it + ``window_grace_minutes`` no more model questions). "Inside the window" here is: every team
done, no step deferred, night wall time <= 20 min.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ops.bench import scale_parts as parts
from ops.bench.run import machine
from ops.bench.scenario import ROOT, _descendants

SLOT = "2026-11-28"
NIGHT = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
INGESTED = "2026-11-28T00:30:00+01:00"  # after the day's last message, 2.5 h before the night
WINDOW_S = 20 * 60  # 03:05 -> 03:25
LEAD_S = 25.0  # the clocks start this long (+ 10 s a worker) before 03:05: time for the workers to come up
STEPS = ("prune", "distill", "reflect", "decay")


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    out: Path = a.out
    work = out / "work" / "scale"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from taskzilla_sleep.core.logs import configure_logging

    configure_logging("warning", json=True)
    logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)  # "property slot does not exist" before any run
    command = "python -m ops.bench.scale " + shlex.join(argv if argv is not None else sys.argv[1:])
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB; commit {info['commit']}")
    print(f"command: {command}", flush=True)

    mix = parts.team_mix(a.teams, a.seed)
    t0 = time.perf_counter()
    data = parts.write_teams(mix, a.seed, work / "teams.jsonl")
    print(f"generated {a.teams} teams {_count(mix)}: {data['messages']} messages in {time.perf_counter() - t0:.0f}s")
    result: dict[str, Any] = {
        "machine": info,
        "command": command,
        "teams": a.teams,
        "mix": {t: _count(mix).get(t, 0) for t in parts.TIERS} | {"tiers": parts.TIERS},
        "messages": data["messages"],
        "llm_latency_s": list(a.llm_latency),
        "team_concurrency": a.team_concurrency,
        "configs": {},
    }
    with _servers(work) as env, _stub(a.llm_latency, a.seed) as stub:
        env |= {"TASKZILLA__LLM__API_BASE": stub.url}
        runs = ([] if a.kill_only else [(n, False) for n in a.workers]) + ([(2, True)] if a.kill else [])
        for n, kill in runs:
            name = f"{n}-workers" + ("-kill" if kill else "")
            print(f"== {name}", flush=True)
            calls0 = len(stub.calls)
            fig = _one_night(n, kill, mix, data, env, work / name, a)
            fig["stub"] = {"calls": len(stub.calls) - calls0, "max_in_flight": stub.max_in_flight}
            result["configs"][name] = fig
            _print(name, fig)
            _write(out, result)
    _speedups(result)
    _write(out, result)
    print(json.dumps({k: result[k] for k in ("speedup",)}, indent=1))
    print(f"wrote {out / 'scale.json'}")
    return 0


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--teams", type=int, default=None, help="teams in the night (default 500; --quick 12)")
    ap.add_argument("--workers", default=None, help="worker counts to compare, e.g. 1,2,4 (--quick: 1,2)")
    ap.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    ap.add_argument("--no-kill", dest="kill", action="store_false", help="skip the kill -9 hand-over run")
    ap.add_argument("--kill-only", action="store_true", help="only the kill -9 hand-over run (2 workers)")
    ap.add_argument("--llm-latency", default="0.5-2.0", help="seconds per chat call, uniform in LO-HI")
    ap.add_argument("--team-concurrency", type=int, default=1, help="worker.team_concurrency of each worker")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout-min", type=float, default=60.0, help="give up on a night after this long")
    ap.add_argument("--out", type=Path, default=ROOT / ".tmp" / "bench")
    a = ap.parse_args(argv)
    a.teams = a.teams if a.teams is not None else (12 if a.quick else 500)
    try:
        a.workers = [int(x) for x in (a.workers or ("1,2" if a.quick else "1,2,4")).split(",")]
        lo, hi = (float(x) for x in a.llm_latency.split("-"))
    except ValueError:
        ap.error(
            f"--workers wants counts like 1,2,4 and --llm-latency LO-HI seconds (got {a.workers!r}, {a.llm_latency!r})"
        )
    if not a.workers or min(a.workers) < 1 or a.teams < 1 or not 0 <= lo <= hi:
        ap.error("--workers counts and --teams must be at least 1, and --llm-latency 0 <= LO <= HI")
    a.llm_latency = (lo, hi)
    return a


def _count(mix: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for tier in mix.values():
        out[tier] = out.get(tier, 0) + 1
    return out


# -- the servers --------------------------------------------------------------------------------


@contextlib.contextmanager
def _servers(work: Path) -> Iterator[dict[str, str]]:
    from tests.chroma_service import chroma_server
    from tests.neo4j_service import neo4j_server, servers_env

    with neo4j_server(work / "neo4j") as uri, chroma_server(work / "chroma-server") as address:
        yield servers_env(uri, address) | {
            "TASKZILLA__VECTOR__TIMEOUT_S": "60",
            "TASKZILLA__LLM__MODEL": "openai/bench-stub",
            "TASKZILLA__LLM__TIMEOUT_S": "60",
            "TASKZILLA__WATCHDOG__ENABLED": "false",
            **{f"TASKZILLA__SCHEDULE__{s.upper()}": "03:05" for s in STEPS},
        }


@contextlib.contextmanager
def _stub(latency: tuple[float, float], seed: int) -> Iterator[Any]:
    """The LLM stub answering as ``model.py``, each chat call taking LO + uniform(0, HI - LO) s."""
    from ops.bench import model
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM
    from tests.llm_stub import LLMStub, Reply

    embedder = OfflineMiniLM()
    answer = model.responder(embedder.embed)
    rnd = random.Random(seed)
    lo, hi = latency

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(content=answer(body), delay_s=rnd.uniform(0.0, hi - lo))

    with LLMStub(default=reply, latency_s=lo) as stub:
        yield stub


@contextlib.contextmanager
def _stores(env: dict[str, str], data: Path) -> Iterator[Any]:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.core.settings import Secrets, load_settings

    full = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | env
    with build(load_settings(env=full | {"TASKZILLA_DATA_DIR": str(data)}), Secrets.from_env(full)) as s:
        yield s


def _env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")} | {"HF_HUB_OFFLINE": "1"} | env


# -- one night ----------------------------------------------------------------------------------


def _one_night(
    n: int,
    kill: bool,
    mix: dict[str, str],
    data: dict[str, Any],
    env: dict[str, str],
    work: Path,
    a: argparse.Namespace,
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    with _stores(env, work / "harness") as s:
        s.graph.delete_all()
        s.vectors.delete_all()
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "taskzilla_sleep", "ingest", str(work.parent / "teams.jsonl"), "--now", INGESTED]
        with (work / "ingest.log").open("w") as log:
            done = subprocess.run(cmd + ["--data-dir", str(work / "ingest")], stdout=log, stderr=subprocess.STDOUT,
                                  env=_env(env), cwd=ROOT, check=False)  # fmt: skip
        ingest_s = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"ingest failed ({done.returncode}); log {work / 'ingest.log'}")
        print(f"   ingested {sum(data['messages'].values())} messages in {ingest_s:.0f}s", flush=True)
        worker_env = env | {"TASKZILLA__WORKER__TEAM_CONCURRENCY": str(a.team_concurrency)}
        with _workers(n, worker_env, work) as procs:
            fig = _measure(procs, kill, mix, data, s, a)
        fig["ingest_s"] = round(ingest_s, 1)
        fig["ingest_per_s"] = round(sum(data["messages"].values()) / ingest_s, 1)
        return fig


@contextlib.contextmanager
def _workers(n: int, env: dict[str, str], work: Path) -> Iterator[list[Any]]:
    """N workers whose clocks agree: each starts at 03:05 - LEAD_S + the seconds since the first."""
    procs: list[Any] = []
    t0 = time.monotonic()
    try:
        for i in range(n):
            start = NIGHT - timedelta(seconds=_lead(n)) + timedelta(seconds=time.monotonic() - t0)
            log = (work / f"worker-{i}.log").open("w")
            cmd = [sys.executable, "-m", "taskzilla_sleep", "worker", "--data-dir", str(work / f"w{i}"),
                   "--api-port", "0", "--clock-start", start.isoformat(), "--clock-speed", "1"]  # fmt: skip
            env_i = _env(env) | {"TASKZILLA_LOG_LEVEL": "info", "TASKZILLA__WORKER__CATCH_UP": "false"}
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env_i, cwd=ROOT)
            p.log_path, p.t0, p.lead = Path(log.name), t0, _lead(n)  # type: ignore[attr-defined]
            procs.append(p)
        for i, p in enumerate(procs):
            first = p.stdout.readline() if p.stdout else ""
            if "API http://" not in first:
                raise RuntimeError(f"worker {i} did not start: {first!r}; log {p.log_path}")
            p.api = first.split("API ", 1)[1].split(",", 1)[0]
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _lead(n: int) -> float:
    return LEAD_S + 10.0 * n


def _clock_skew_s(procs: list[Any]) -> float | None:
    """How far apart the workers' clocks are (each read over its API, against the harness's)."""
    from taskzilla_sleep.client import ApiError, Client

    offsets = []
    for p in procs:
        with Client(p.api, timeout=30) as c:
            try:
                got = datetime.fromisoformat(c.status()["clock"])
            except ApiError as exc:  # /v1/status reads whole-store sizes: slow with many teams
                print(f"   clock skew not measured: {exc}", flush=True)
                return None
        want = NIGHT - timedelta(seconds=p.lead) + timedelta(seconds=time.monotonic() - p.t0)
        offsets.append((got - want).total_seconds())
    return round(max(offsets) - min(offsets), 2)


def _measure(
    procs: list[Any], kill: bool, mix: dict[str, str], data: dict[str, Any], s: Any, a: argparse.Namespace
) -> dict[str, Any]:
    night_at = procs[0].t0 + procs[0].lead  # monotonic time of 03:05 on the workers' clocks
    skew = _clock_skew_s(procs)
    phase = lambda: "night" if time.monotonic() >= night_at else "idle"  # noqa: E731
    pids = {f"worker-{i}": p.pid for i, p in enumerate(procs)}
    servers = {f"{_comm(pid)}-{pid}": pid for pid in _descendants(os.getpid()) if pid not in pids.values()}
    out: dict[str, Any] = {"workers": len(procs), "clock_skew_s": skew}
    if time.monotonic() >= night_at:
        out["late_start"] = "the workers came up after 03:05 on their clocks: CPU includes their start"
    with parts.Sampler(pids | servers) as sampler, parts.RecallProbe(procs[0].api, data["queries"], phase) as probe:
        time.sleep(max(0.0, night_at - time.monotonic()))
        sampler.sample()
        cpu0 = dict(sampler.last_cpu)
        deadline = time.monotonic() + a.timeout_min * 60
        victim: dict[str, Any] = {}
        while True:
            runs = s.graph.slot_runs(SLOT)
            done = parts.teams_done(runs, STEPS)
            if len(done) == len(mix):
                break
            if time.monotonic() > deadline:  # the figures of what is done, marked unfinished
                out["unfinished"] = f"stopped after {a.timeout_min} min: {len(done)}/{len(mix)} teams done"
                print(f"   {out['unfinished']}", flush=True)
                break
            if kill and not victim and len(done) >= len(mix) // 3:
                victim = _kill_one(procs, _holders(s.graph, [t for t in mix if t not in done]))
            if victim and "handover_s" not in victim:
                _handover(victim, s.graph, done)
            time.sleep(1.0)
        sampler.sample()
        cpu1 = dict(sampler.last_cpu)
    runs = s.graph.slot_runs(SLOT)
    out |= parts.night_figures(runs, mix, STEPS)
    worker_cpu = {k: round(cpu1[k] - cpu0.get(k, 0.0), 1) for k in pids if k in cpu1}
    out["worker_cpu_s"] = worker_cpu
    out["worker_cpu_s_per_team"] = round(sum(worker_cpu.values()) / max(1, out["teams_done"]), 3)  # per team done
    # Neo4j (java) and the Chroma server: the shared stores' CPU over the same stretch
    out["server_cpu_s"] = {k: round(cpu1[k] - cpu0.get(k, 0.0), 1) for k in servers if k in cpu1}
    out["peak_rss_mb"] = {k: round(v, 1) for k, v in sampler.peak_rss.items() if k in pids}
    out["server_peak_rss_mb"] = {k: round(v, 1) for k, v in sampler.peak_rss.items() if k in servers}
    out["recall"] = probe.figures()
    out["inside_window"] = bool(
        out["wall_s"] is not None and out["wall_s"] <= WINDOW_S and not out["deferred_steps"]
        and out["teams_done"] == len(mix)
    )  # fmt: skip
    if kill:
        out["kill"] = {k: v for k, v in victim.items() if k != "proc"}
    return out


def _kill_one(procs: list[Any], holders: dict[str, str]) -> dict[str, Any]:
    """kill -9 the second worker while it holds a team; {} when it holds none at this instant."""
    p = procs[1]
    held = [t for t, h in holders.items() if f":{p.pid}:" in h]
    if not held or p.poll() is not None:
        return {}
    os.kill(p.pid, signal.SIGKILL)
    killed = time.monotonic()
    p.wait()
    print(f"   killed worker-1 (pid {p.pid}) holding {held}", flush=True)
    return {"pid": p.pid, "teams": held, "killed_at": killed, "survivor_pid": procs[0].pid}


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "gone"


def _holders(graph: Any, teams: list[str]) -> dict[str, str]:
    """Team -> the live holder of its lease, for ``teams`` only (one read each)."""
    from taskzilla_sleep.runtime.lease import live_holder, team_lease_name

    held = {t: live_holder(graph, team_lease_name(t)) for t in teams}
    return {t: h for t, h in held.items() if h is not None}


def _handover(victim: dict[str, Any], graph: Any, done: set[str]) -> None:
    """Polled every 0.1 s for up to a second: once the survivor holds (or has finished) every team the
    dead replica held, the seconds since the kill."""
    mine = f":{victim['survivor_pid']}:"
    for _ in range(10):
        holders = _holders(graph, victim["teams"])
        if all(t in done or mine in holders.get(t, "") for t in victim["teams"]):
            victim["handover_s"] = round(time.monotonic() - victim.pop("killed_at"), 2)
            return
        time.sleep(0.1)


def _speedups(result: dict[str, Any]) -> None:
    configs = result["configs"]
    one = configs.get("1-workers", {}).get("wall_s")
    result["speedup"] = {
        name: round(one / c["wall_s"], 2)
        for name, c in configs.items()
        if one and c.get("wall_s") and "kill" not in name
    }


def _print(name: str, f: dict[str, Any]) -> None:
    rec = f["recall"]
    print(
        f"   night wall {f['wall_s']} s; teams done {f['teams_done']} (every step ok once: "
        f"{f['teams_every_step_ok_once']}); deferred {f['deferred_steps']}; inside window {f['inside_window']}\n"
        f"   worker CPU {f['worker_cpu_s']} s = {f['worker_cpu_s_per_team']} s/team; peak RSS {f['peak_rss_mb']} MB; "
        f"clock skew {f['clock_skew_s']} s; servers' CPU {f['server_cpu_s']} s\n"
        f"   recall idle {rec.get('idle')} night {rec.get('night')} errors {rec['errors']}\n"
        f"   tiers {json.dumps(f['tiers'])}\n   stub {f['stub']}" + (f"\n   kill {f['kill']}" if "kill" in f else ""),
        flush=True,
    )


def _write(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
