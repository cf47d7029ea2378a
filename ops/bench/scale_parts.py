"""The scale bench's parts (``ops/bench/scale.py``): the many-team data set, the per-process sampler,
the recall client, and the figures read from the run ledger.

The team mix (documented in BENCHMARKS.md): ``generate.py``'s synthetic team at three sizes, one
day of messages each (the day before the night), every team its own seed:

- busy: 2 % of the teams (at least one), 2,000 messages a day, 12 people, 6 channels;
- medium: 18 %, 300 messages a day, 8 people, 4 channels;
- quiet: the rest (80 %), 30 messages a day, 4 people, 2 channels.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from ops.bench.scenario import _pct

TIERS: dict[str, dict[str, Any]] = {
    "busy": {"share": 0.02, "per_day": 2000, "people": 12, "channels": 6},
    "medium": {"share": 0.18, "per_day": 300, "people": 8, "channels": 4},
    "quiet": {"share": 0.80, "per_day": 30, "people": 4, "channels": 2},
}
DAY = date(2026, 11, 27)  # the day whose messages the night consolidates
_GEN_DAYS = 4  # generate() wants at least 4 days; the last one is kept


def team_mix(n: int, seed: int) -> dict[str, str]:
    """Team name -> tier: ``n`` teams, the tiers' shares rounded (at least one busy team), in a
    seeded order (busy teams are spread over the list, not first)."""
    if n < 1:
        raise ValueError(f"--teams must be at least 1 (got {n})")
    busy = max(1, round(n * TIERS["busy"]["share"]))
    medium = min(n - busy, round(n * TIERS["medium"]["share"]))
    tiers = ["busy"] * busy + ["medium"] * medium + ["quiet"] * (n - busy - medium)
    random.Random(seed).shuffle(tiers)
    return {f"team-{i:04d}": t for i, t in enumerate(tiers)}


def write_teams(mix: dict[str, str], seed: int, path: Path) -> dict[str, Any]:
    """One JSONL file of every team's day (ids prefixed with the team: ids are store-wide)."""
    from ops.bench.generate import generate

    path.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    queries: dict[str, list[str]] = {}
    with path.open("w", encoding="utf-8") as f:
        for i, (team, tier) in enumerate(mix.items()):
            t = TIERS[tier]
            gen = generate(
                seed=seed + i,
                people=t["people"],
                channels=t["channels"],
                days=_GEN_DAYS,
                per_day=t["per_day"],
                start=date.fromordinal(DAY.toordinal() - _GEN_DAYS + 1),
                team=team,
            )
            day = gen.days()[-1]
            for e in day:
                f.write(json.dumps(e | {"id": f"{team}:{e['id']}"}, ensure_ascii=False) + "\n")
            counts[tier] = counts.get(tier, 0) + len(day)
            humans = [e["text"] for e in day if e["provenance"] == "human" and len(e["text"].split()) >= 5]
            queries[team] = humans[:: max(1, len(humans) // 5)][:5] or [day[0]["text"]]
    return {"messages": counts, "queries": queries}


# -- processes ----------------------------------------------------------------------------------

_TICK = 100.0  # os.sysconf("SC_CLK_TCK") on Linux


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far (/proc/<pid>/stat); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Sampler:
    """Every ``every_s``: each watched process's RSS (its peak kept) and CPU seconds (its last kept,
    so a process killed mid-night still counts what it used)."""

    def __init__(self, pids: dict[str, int], every_s: float = 0.5) -> None:
        self.pids = dict(pids)
        self.peak_rss: dict[str, float] = {}
        self.last_cpu: dict[str, float] = {}
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()

    def sample(self) -> None:
        for name, pid in self.pids.items():
            rss, cpu = rss_mb(pid), cpu_s(pid)
            if rss is not None:
                self.peak_rss[name] = max(self.peak_rss.get(name, 0.0), rss)
            if cpu is not None:
                self.last_cpu[name] = cpu

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self.sample()


@dataclass
class RecallProbe:
    """A client asking one worker ``GET /v1/recall`` in a loop (one request in flight, a pause of
    ``pause_s`` between), each latency tagged with what ``phase()`` said when it was sent."""

    api: str
    queries: dict[str, list[str]]
    phase: Callable[[], str]
    pause_s: float = 0.5
    seed: int = 7
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RecallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        from taskzilla_sleep.client import ApiError, Client

        rnd = random.Random(self.seed)
        teams = sorted(self.queries)
        with Client(self.api, timeout=30) as c:
            while not self._stop.is_set():
                team = rnd.choice(teams)
                q = rnd.choice(self.queries[team])
                phase = self.phase()
                t0 = time.perf_counter()
                try:
                    c.recall(q, team=team, k=5)
                except (ApiError, OSError) as exc:  # counted, not fatal: a busy worker may time out
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                self.latencies.setdefault(phase, []).append((time.perf_counter() - t0) * 1000)
                self._stop.wait(self.pause_s)

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"errors": len(self.errors), "first_errors": self.errors[:3]}
        for phase, ms in self.latencies.items():
            out[phase] = {"n": len(ms), "p50_ms": round(_pct(ms, 50), 1), "p95_ms": round(_pct(ms, 95), 1)}
        return out


# -- the ledger ---------------------------------------------------------------------------------


def team_steps(runs: Sequence[Any]) -> dict[str, dict[str, list[str]]]:
    """Team -> step -> the statuses its attempts ended with (a repeat shows twice)."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in runs:
        for s in r.steps:
            out.setdefault(r.team or "", {}).setdefault(s.step, []).append(s.status)
    return out


def teams_done(runs: Sequence[Any], steps: Sequence[str]) -> set[str]:
    """The teams whose every step ended ok or deferred in the night."""
    done = {"ok", "deferred"}
    return {t for t, by in team_steps(runs).items() if all(any(x in done for x in by.get(s, [])) for s in steps)}


def night_figures(runs: Sequence[Any], mix: dict[str, str], steps: Sequence[str]) -> dict[str, Any]:
    """Wall time (first step start to last step end, over the ledger), per-tier job wall time and
    model calls, deferred steps and why, and the exactly-once check (each team's step ok once)."""
    starts = [s.started_at for r in runs for s in r.steps if s.started_at]
    ends = [s.finished_at for r in runs for s in r.steps if s.finished_at]
    per_team_wall: dict[str, float] = {}
    per_team_calls: dict[str, int] = {}
    per_team_tokens: dict[str, int] = {}
    deferred: list[str] = []
    # A job's time outside its steps: the lease, the ledger, whole-store sizes before and after, the
    # memory index (what grows with the number of teams shows here)
    overhead = [
        (r.finished_at - r.started_at).total_seconds()
        - sum((s.finished_at - s.started_at).total_seconds() for s in r.steps if s.started_at and s.finished_at)
        for r in runs
        if r.finished_at
    ]
    for r in runs:
        for s in r.steps:
            if s.started_at and s.finished_at:
                per_team_wall[r.team] = per_team_wall.get(r.team, 0.0) + (s.finished_at - s.started_at).total_seconds()
            per_team_calls[r.team] = per_team_calls.get(r.team, 0) + s.llm_calls
            per_team_tokens[r.team] = per_team_tokens.get(r.team, 0) + s.prompt_tokens + s.completion_tokens
            if s.status == "deferred":
                deferred += [f"{r.team} {s.step}: {d}" for d in s.deferred] or [f"{r.team} {s.step}"]
    by = team_steps(runs)
    once = {t: all(by.get(t, {}).get(s, []).count("ok") == 1 for s in steps) for t in mix}
    tiers: dict[str, Any] = {}
    for tier in TIERS:
        teams = [t for t, x in mix.items() if x == tier]
        if not teams:
            continue
        walls = [per_team_wall.get(t, 0.0) for t in teams]
        calls = [per_team_calls.get(t, 0) for t in teams]
        tiers[tier] = {
            "teams": len(teams),
            "job_wall_s_median": round(statistics.median(walls), 2),
            "job_wall_s_max": round(max(walls), 2),
            "llm_calls_median": statistics.median(calls),
            "llm_calls_total": sum(calls),
            "tokens_total": sum(per_team_tokens.get(t, 0) for t in teams),
        }
    return {
        "wall_s": round((max(ends) - min(starts)).total_seconds(), 1) if starts and ends else None,
        "first_start": min(starts).isoformat() if starts else None,
        "last_end": max(ends).isoformat() if ends else None,
        "teams_done": len(teams_done(runs, steps)),
        "teams_every_step_ok_once": sum(once.values()),
        "not_once": sorted(t for t, ok in once.items() if not ok)[:10],
        "abandoned": sum(s.status == "abandoned" for r in runs for s in r.steps),
        "deferred": deferred[:20],
        "deferred_steps": len(deferred),
        "tiers": tiers,
        "job_overhead_s_median": round(statistics.median(overhead), 2) if overhead else None,
    }
