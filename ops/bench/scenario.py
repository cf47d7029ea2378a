"""One benchmark scenario: a data source on one backend pair, day by day, measured.

Flow (simulated clock; every night at 03:05 Europe/Amsterdam):

1. history: for each day, ingest the day's episodes in time order (batches, the Ingestor's clock
   at the batch's last message), then the full night (prune → distill → reflect → decay). Store
   sizes after every night; recall latency after the first night and after night 30;
2. the measured day: ingest one more day, then the measured night: per-step wall time, LLM wall
   time inside the step, worker time = the difference; quality on the gold after it;
3. the watchdog day: the day's episodes arrive on a 30 s poll clock; the watchdog rules
   (``watchdog_due``) trigger ``run_night(steps=["distill"], trigger="watchdog", lookback=2 h)``;
   the patterns' ``availability_lag_s`` give the lag. The clock advances by each distill's own
   duration, as the worker's would.

The LLM is litellm's ``openai/`` provider against the OpenAI-compatible stub (tests/llm_stub.py)
on 127.0.0.1 with a fixed latency per call; ``TimedLLM`` measures the wall time spent inside the
provider so worker time and LLM time separate.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from ops.bench import compat

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tests/ (the stub and the server helpers) live beside the package
    sys.path.append(str(ROOT))

TZ = ZoneInfo("Europe/Amsterdam")
NIGHT_AT = (3, 5)
SETTLE_S = 3.0
REOPEN_LIMIT_S = 120.0  # the embedded graph must reopen within this (a worker's start waits 10 s)


@dataclass
class Config:
    source: str  # "synthetic" | "irc"
    pair: str  # "falkordb+chroma-embedded" | "neo4j+chroma-server"
    work: Path
    days: int = 30  # history days before the measured day
    per_day: int = 2000
    people: int = 12
    channels: int = 6
    seed: int = 7
    start: date = date(2026, 10, 12)
    llm_latency_s: float = 0.25
    llm_concurrency: int = 4
    ingest_batch: int = 500
    recall_queries: int = 60
    recall_rounds: int = 5
    watchdog: bool = True
    irc_path: Path | None = None
    profile: bool = False


@dataclass
class StepTime:
    wall_s: float = 0.0
    llm_wall_s: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def worker_s(self) -> float:
        return max(0.0, self.wall_s - self.llm_wall_s)


@dataclass
class Totals:
    ingested: int = 0
    ingest_s: float = 0.0
    embed_texts: int = 0  # texts embedded while ingesting (recall queries and the steps' few are left out)
    embed_s: float = 0.0
    ingesting: bool = False
    per_day_rate: list[float] = field(default_factory=list)
    per_day_embed_rate: list[float] = field(default_factory=list)


# -- instrumentation ------------------------------------------------------------------------------


class TimedLLM:
    """The LLMProvider, with the wall time spent inside it (HTTP round trips, waits, client work)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.wall_s = 0.0

    @property
    def usage(self) -> Any:
        return self.inner.usage

    @property
    def prompt_ids(self) -> Any:
        return self.inner.prompt_ids

    def distill_many(self, requests: Sequence[Any]) -> list[Any]:
        t0 = time.perf_counter()
        try:
            return list(self.inner.distill_many(requests))
        finally:
            self.wall_s += time.perf_counter() - t0

    def classify_many(self, requests: Sequence[Any]) -> list[Any]:
        t0 = time.perf_counter()
        try:
            return list(self.inner.classify_many(requests))
        finally:
            self.wall_s += time.perf_counter() - t0


def instrument_embedder(embedder: Any, totals: Totals) -> None:
    """Count texts and seconds in the embedder's batch encoder (used by Chroma and the steps)."""
    encode = embedder._encode
    depth = [0]  # the encoder may call itself (distinct texts): count the outermost call only

    def timed(texts: Sequence[str]) -> Any:
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return encode(texts)
        finally:
            depth[0] -= 1
            if totals.ingesting and depth[0] == 0:
                totals.embed_s += time.perf_counter() - t0
                totals.embed_texts += len(texts)

    embedder._encode = timed


# -- backends -----------------------------------------------------------------------------------


@contextlib.contextmanager
def backend_settings(pair: str, work: Path) -> Iterator[dict[str, Any]]:
    """Settings overrides for the pair; servers (Neo4j, Chroma) run until the context exits."""
    if pair == "falkordb+chroma-embedded":
        yield {"graph.backend": "falkordb", "vector.backend": "chroma-embedded"}
        return
    if pair != "neo4j+chroma-server":
        raise ValueError(f"unknown backend pair {pair!r}")
    from tests.chroma_service import chroma_server
    from tests.neo4j_service import neo4j_server

    with neo4j_server(work / "neo4j") as uri, chroma_server(work / "chroma-server") as (host, port):
        yield {
            "graph.backend": "neo4j",
            "graph.neo4j_uri": uri,
            "vector.backend": "chroma-server",
            "vector.host": host,
            "vector.port": port,
            "vector.timeout_s": 60,
        }


def peak_rss_mb() -> dict[str, float]:
    """Peak RSS of this process and of its live child processes (FalkorDB, Chroma server, Neo4j)."""
    out = {"worker": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    me = os.getpid()
    for pid in _descendants(me):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        hwm = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), None)
        if hwm:
            out[f"{name}"] = out.get(name, 0.0) + int(hwm.split()[1]) / 1024
    return {k: round(v, 1) for k, v in out.items()}


def _rss_now_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


# -- the scenario -------------------------------------------------------------------------------


def night_of(day: date) -> datetime:
    """The night after ``day``: 03:05 local on the next day."""
    nxt = day + timedelta(days=1)
    return datetime(nxt.year, nxt.month, nxt.day, *NIGHT_AT, tzinfo=TZ)


def run(cfg: Config) -> dict[str, Any]:
    from taskzilla_sleep.core.logs import configure_logging

    configure_logging("warning", json=True)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    cfg.work.mkdir(parents=True, exist_ok=True)
    data = _data(cfg)
    data.info["harness_rss_mb"] = _rss_now_mb()  # the data set in memory, before any store is opened
    with backend_settings(cfg.pair, cfg.work) as overrides:
        return _run(cfg, data, overrides)


@dataclass
class Data:
    team: str
    days: list[list[dict[str, Any]]]  # episodes per day (history days, the measured day, the watchdog day)
    gold: dict[str, Any] | None
    info: dict[str, Any]
    queries: list[str]


def _data(cfg: Config) -> Data:
    if cfg.source == "synthetic":
        from ops.bench.generate import generate, write

        total = cfg.days + (2 if cfg.watchdog else 1)
        gen = generate(
            seed=cfg.seed,
            people=cfg.people,
            channels=cfg.channels,
            days=total,
            per_day=cfg.per_day,
            start=cfg.start,
        )
        write(gen, cfg.work / "dataset")
        gold = {**gen.gold, "skipped_by_config": _skipped_by_config(gen.episodes)}
        queries = [h["statement"] for h in gold["habits"]] + SYNTHETIC_QUERIES
        return Data(gold["team"], gen.days(), gold, {"generated": gold["counts"]}, queries)
    from ops.bench.irc import DEFAULT_PATH, load

    total = cfg.days + (2 if cfg.watchdog else 1)
    days, info = load(cfg.irc_path or DEFAULT_PATH, total, cfg.start)
    return Data("ubuntu", _rebucket(days, cfg.start), None, info, IRC_QUERIES)


def _skipped_by_config(episodes: list[dict[str, Any]]) -> list[str]:
    """Ids the package's default write discipline skips at ingestion (the package under test)."""
    from types import SimpleNamespace

    from taskzilla_sleep.core.settings import load_settings
    from taskzilla_sleep.memory.ingest import WriteDiscipline

    rules = WriteDiscipline(load_settings(env={}).ingest.write_discipline)
    return sorted(e["id"] for e in episodes if rules.connector_for(SimpleNamespace(text=e["text"])) is not None)  # type: ignore[arg-type]


def _rebucket(days: list[list[dict[str, Any]]], start: date) -> list[list[dict[str, Any]]]:
    """Day k = everything before the night after day k (a message at 01:30 belongs to the night before)."""
    flat = sorted((e for d in days for e in d), key=lambda e: (e["ts"], e["id"]))
    out: list[list[dict[str, Any]]] = [[] for _ in days]
    bounds = [night_of(start + timedelta(days=k)) for k in range(len(days))]
    k = 0
    for e in flat:
        ts = datetime.fromisoformat(e["ts"])
        while k < len(days) - 1 and ts >= bounds[k]:
            k += 1
        out[k].append(e)
    return out


SYNTHETIC_QUERIES = [
    "can we deploy to production on friday?",
    "how big should my pull request be",
    "when is standup",
    "who leads the on-call rotation",
    "who is the engineering manager",
    "how many approvals do I need to merge",
    "where do I post release notes",
    "do I need a design doc",
    "the coffee machine is broken",
    "billing-api latency",
    "where do we keep credentials",
    "when is focus time",
]
IRC_QUERIES = [
    "how do I install nvidia drivers",
    "my wifi does not work after upgrade",
    "how to mount an ntfs partition",
    "apt-get update fails with a gpg error",
    "how do I change the screen resolution",
    "grub does not boot after installing windows",
    "which media player plays everything",
    "how to install java",
    "sound is not working",
    "how do I become root with sudo",
    "where is the xorg.conf file",
    "how to upgrade to the new release",
]


def _run(cfg: Config, data: Data, overrides: dict[str, Any]) -> dict[str, Any]:
    from ops.bench import model
    from taskzilla_sleep.app import Services, build_graph, build_llm, build_vectors
    from taskzilla_sleep.core.settings import Secrets, load_settings
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM
    from tests.llm_stub import LLMStub

    totals = Totals()
    embedder = OfflineMiniLM()
    embedder.embed(["warm up"])
    instrument_embedder(embedder, totals)

    with LLMStub(default=model.responder(embedder.embed), latency_s=cfg.llm_latency_s) as stub:
        settings = load_settings(
            env={"TASKZILLA_DATA_DIR": str(cfg.work / "data")},
            overrides={
                **overrides,
                "llm.model": "openai/bench-stub",
                "llm.api_base": stub.url,
                "llm.max_concurrency": cfg.llm_concurrency,
                "llm.timeout_s": 60,
            },
        )
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        graph = build_graph(settings, Secrets.from_env(os.environ))
        vectors = build_vectors(settings, embedder)
        services = Services(settings, graph, vectors, embedder)
        try:
            graph.delete_all()
            vectors.delete_all()
            graph.ensure_schema()
            llm = TimedLLM(build_llm(settings, embedder))
            bench = _Bench(cfg, data, services, llm, totals)
            result = bench.go()
            result["stub"] = {
                "latency_s": cfg.llm_latency_s,
                "calls": len(stub.calls),
                "max_in_flight": stub.max_in_flight,
            }
            return result
        finally:
            services.close()


class _Bench:
    def __init__(self, cfg: Config, data: Data, services: Any, llm: TimedLLM, totals: Totals) -> None:
        self.cfg, self.data, self.s, self.llm, self.totals = cfg, data, services, llm, totals
        self.team = data.team
        self.sizes: list[dict[str, Any]] = []
        self.nights: list[dict[str, Any]] = []
        self.pinned: list[Any] = []
        self.out: dict[str, Any] = {}

    # -- the whole run ----------------------------------------------------------------------------
    def go(self) -> dict[str, Any]:
        cfg, data = self.cfg, self.data
        t_start = time.perf_counter()
        if data.gold is not None:
            self.pinned = self._pin_facts()
        history = cfg.days
        recall: dict[str, Any] = {}
        for d in range(history):
            self._ingest_day(d)
            self._night(d)
            if d == 0:
                recall["day1"] = self._recall_latency(d)
            if d == history - 1:
                recall[f"day{history}"] = self._recall_latency(d)
        self.out["recall"] = recall
        self.out["recall"]["p95_ratio"] = _ratio(recall[f"day{history}"]["p95_ms"], recall["day1"]["p95_ms"])
        self.out["history_s"] = round(time.perf_counter() - t_start, 1)

        # The measured day and night.
        measured = history
        llm_before = _usage(self.llm)
        profile = self._profiler()
        ing = self._ingest_day(measured)
        if profile is not None:
            self.out["profile_ingest"] = self._stop_profile(profile, "ingest")
        profile = self._profiler()
        night = self._night(measured)
        if profile is not None:
            self.out["profile_night"] = self._stop_profile(profile, "night")
        self.out["measured_night"] = {
            "day": measured + 1,
            "episodes": len(data.days[measured]),
            "ingest": ing,
            **night,
            "llm_calls_per_episode": _ratio(_usage(self.llm)[0] - llm_before[0], len(data.days[measured])),
        }
        if data.gold is not None:
            from ops.bench.quality import evaluate

            q = evaluate(
                data.gold,
                self.s.graph,
                upto_day=measured,
                pinned=self.pinned,
                grace_hours=self.s.settings.decay.grace_hours,
            )
            self.out["quality"] = q.as_dict()

        if cfg.watchdog:
            self.out["watchdog"] = self._watchdog_day(measured + 1)
            if data.gold is not None:
                from ops.bench.quality import evaluate

                q = evaluate(
                    data.gold,
                    self.s.graph,
                    upto_day=measured + 1,
                    pinned=self.pinned,
                    grace_hours=self.s.settings.decay.grace_hours,
                )
                self.out["quality_final"] = {
                    k: v
                    for k, v in q.as_dict().items()
                    if k in ("episodes_expected", "episodes_lost", "pinned_facts_touched", "ai_drafts_learned",
                             "retired_badly", "skipped_stored", "by_status")
                }  # fmt: skip
        from taskzilla_sleep.memory.reconcile import reconcile

        self.out["drift_at_end"] = reconcile(self.s.graph, self.s.vectors, repair=False).drift
        u = _usage(self.llm)
        self.out["ingest"] = {
            "episodes": self.totals.ingested,
            "seconds": round(self.totals.ingest_s, 2),
            "episodes_per_s": _ratio(self.totals.ingested, self.totals.ingest_s, 1),
            "episodes_per_s_median_day": round(statistics.median(self.totals.per_day_rate), 1),
        }
        self.out["embedding"] = {
            "texts": self.totals.embed_texts,
            "seconds": round(self.totals.embed_s, 2),
            "texts_per_s": _ratio(self.totals.embed_texts, self.totals.embed_s, 1),
            "texts_per_s_median_day": round(statistics.median(self.totals.per_day_embed_rate), 1),
        }
        self.out["llm"] = {
            "calls": u[0],
            "prompt_tokens": u[1],
            "completion_tokens": u[2],
            "calls_per_episode": _ratio(u[0], self.totals.ingested),
            "tokens_per_episode": _ratio(u[1] + u[2], self.totals.ingested, 2),
            "wall_s": round(self.llm.wall_s, 1),
        }
        self.out["sizes_per_day"] = self.sizes
        self.out["episodes_per_day"] = [len(d) for d in data.days]  # handed to ingest, skipped ones included
        self.out["nights"] = self.nights
        last5 = self.nights[max(0, history - 5) : history]
        self.out["history_nights_last5_worker_s_median"] = (
            round(statistics.median(n["worker_s"] for n in last5), 3) if last5 else None
        )
        last = self.sizes[history - 1] if len(self.sizes) >= history else self.sizes[-1]
        ingested_by_then = sum(len(data.days[d]) for d in range(history))
        live_vectors = last["vectors_episodes"] + last["vectors_patterns"]
        self.out["store_after_history"] = {
            "day": history,
            "episodes_ingested": ingested_by_then,
            "live_vectors": live_vectors,
            "live_vectors_share": _ratio(live_vectors, ingested_by_then),
            "graph_nodes": last["nodes"],
            "disk_mb": last["disk_mb"],
            "graph_edges": last["relationships"],
            "episodes_with_text": last["episodes_live"],
            "patterns_live": last["patterns_live"],
        }
        self.out["recall"]["paired"] = self._recall_paired(measured + int(cfg.watchdog))
        self.out["peak_rss_mb"] = peak_rss_mb()
        self.out["reopen"] = self._reopen()  # last: a store that cannot reopen in time ends the run
        self.out["total_s"] = round(time.perf_counter() - t_start, 1)
        self.out["data"] = data.info
        return self.out

    # -- pieces -------------------------------------------------------------------------------
    def _pin_facts(self, team: str | None = None) -> list[Any]:
        """The gold's pinned facts, pinned on day 1 at 08:00 for ``team`` (the run's team by default)."""
        from taskzilla_sleep.memory import facts

        assert self.data.gold is not None
        at = datetime(self.cfg.start.year, self.cfg.start.month, self.cfg.start.day, 8, 0, tzinfo=TZ)
        return [
            facts.pin(self.s.graph, self.s.vectors, team or self.team, f["text"], f["by"], at, f["entity"])
            for f in self.data.gold["pinned_facts"]
        ]

    def _ingestor(self, clock: Callable[[], datetime]) -> Any:
        return self.s.ingestor(clock=clock)

    def _ingest(self, batch: list[dict[str, Any]], at: datetime) -> float:
        lines = [json.dumps(e, ensure_ascii=False) for e in batch]
        ing = self._ingestor(lambda: at)
        self.totals.ingesting = True
        t0 = time.perf_counter()
        try:
            ing.ingest_lines(lines, "bench")
        finally:
            dt = time.perf_counter() - t0
            self.totals.ingesting = False
        self.totals.ingested += len(batch)
        self.totals.ingest_s += dt
        return dt

    def _batches(self, eps: list[dict[str, Any]]) -> Iterator[tuple[list[dict[str, Any]], datetime]]:
        """``eps`` in ingest batches, each with the time it is handed in (30 s after its last message)."""
        size = self.cfg.ingest_batch
        for i in range(0, len(eps), size):
            batch = eps[i : i + size]
            yield batch, datetime.fromisoformat(batch[-1]["ts"]) + timedelta(seconds=30)

    def _ingest_day(self, d: int) -> dict[str, Any]:
        eps = self.data.days[d]
        spent = 0.0
        emb0 = (self.totals.embed_texts, self.totals.embed_s)
        for batch, at in self._batches(eps):
            spent += self._ingest(batch, at)
        rate = _ratio(len(eps), spent, 1)
        self.totals.per_day_rate.append(rate)
        self.totals.per_day_embed_rate.append(
            _ratio(self.totals.embed_texts - emb0[0], self.totals.embed_s - emb0[1], 1)
        )
        return {
            "episodes": len(eps),
            "seconds": round(spent, 2),
            "episodes_per_s": rate,
            "embed_s": round(self.totals.embed_s - emb0[1], 2),
            "embedded": self.totals.embed_texts - emb0[0],
        }

    def _night(self, d: int) -> dict[str, Any]:
        from ops.bench.compat import run_night

        now = night_of(self.cfg.start + timedelta(days=d))
        marks: list[tuple[str, float, tuple[int, int, int]]] = []

        def before(step: str) -> bool:
            marks.append((step, self.llm.wall_s, _usage(self.llm)))
            return True

        t0 = time.perf_counter()
        res = run_night(
            settings=self.s.settings,
            graph=self.s.graph,
            vectors=self.s.vectors,
            embedder=self.s.embedder,
            llm=self.llm,
            now=now,
            trigger="schedule",
            before_step=before,  # type: ignore[arg-type]
        )
        total = time.perf_counter() - t0
        marks.append(("end", self.llm.wall_s, _usage(self.llm)))
        steps: dict[str, Any] = {}
        for s in res.run.steps:
            i = next((k for k, m in enumerate(marks) if m[0] == s.step), None)
            llm_wall = marks[i + 1][1] - marks[i][1] if i is not None else 0.0
            wall = (s.finished_at - s.started_at).total_seconds() if s.finished_at and s.started_at else 0.0
            st = StepTime(wall, llm_wall, s.llm_calls, s.prompt_tokens, s.completion_tokens)
            steps[s.step] = {
                "status": s.status,
                "wall_s": round(st.wall_s, 3),
                "llm_wall_s": round(st.llm_wall_s, 3),
                "worker_s": round(st.worker_s, 3),
                "llm_calls": st.llm_calls,
                "tokens": st.prompt_tokens + st.completion_tokens,
                "counts": s.counts,
            }
            if s.status != "ok":
                steps[s.step]["error"] = s.error
        worker = sum(v["worker_s"] for v in steps.values())
        overhead = total - sum(v["wall_s"] for v in steps.values())
        entry = {
            "day": d + 1,
            "now": now.isoformat(),
            "ok": res.ok,
            "wall_s": round(total, 3),
            "worker_s": round(worker + overhead, 3),
            "outside_steps_s": round(overhead, 3),
            "steps": steps,
        }
        self.nights.append(entry)
        sizes = dict(res.run.sizes_after)
        sizes["nodes"] = int(compat.read(self.s.graph, "MATCH (n) RETURN count(n) AS n")[0]["n"])
        sizes["disk_mb"] = _disk_mb(self.cfg.work, exclude="dataset")
        sizes["day"] = d + 1
        self.sizes.append(sizes)
        print(
            f"[{self.cfg.source}/{self.cfg.pair}] day {d + 1}: night {total:.1f}s "
            + " ".join(f"{k}={v['wall_s']:.1f}/{v['llm_wall_s']:.1f}" for k, v in steps.items())
            + f" vectors={sizes.get('vectors_episodes')} patterns={sizes.get('patterns_live')}",
            file=sys.stderr,
            flush=True,
        )
        return entry

    def _reopen(self) -> dict[str, Any]:
        """Close the stores and open them again, as a restarted worker does (embedded: reload from disk)."""
        from taskzilla_sleep.app import build_graph, build_vectors
        from taskzilla_sleep.core.errors import StoreError
        from taskzilla_sleep.core.settings import Secrets

        s = self.s
        s.vectors.close()
        s.graph.close()
        t0 = time.perf_counter()
        settings = s.settings.model_copy(
            update={"graph": s.settings.graph.model_copy(update={"connect_timeout_s": REOPEN_LIMIT_S})}
        )
        try:
            s.graph = build_graph(settings, Secrets.from_env(os.environ))
            s.graph.ping()
        except StoreError as exc:
            return {"graph_s": None, "error": f"not open after {REOPEN_LIMIT_S:.0f} s: {str(exc)[:200]}"}
        graph_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        s.vectors = build_vectors(s.settings, s.embedder)
        s.vectors.count(self.team, "episodes")
        vectors_s = time.perf_counter() - t1
        return {"graph_s": round(graph_s, 2), "vectors_s": round(vectors_s, 2)}

    def _recall_latency(self, d: int) -> dict[str, Any]:
        now = night_of(self.cfg.start + timedelta(days=d)) + timedelta(hours=7)
        qs = self.data.queries
        # The bot asks hours after the night: let the stores' background work after a night's writes
        # (Chroma's compaction, the AOF rewrite) settle, then warm up (the first query loads an index).
        time.sleep(SETTLE_S)
        for i in range(self.cfg.recall_queries):  # one unmeasured round (a JVM server also JIT-compiles)
            compat.recall(self.s, qs[i % len(qs)], now, self.team)
        p50s, p95s, all_ms = [], [], []
        profile = self._profiler()
        for _ in range(self.cfg.recall_rounds):
            times = []
            for i in range(self.cfg.recall_queries):
                q = qs[i % len(qs)]
                t0 = time.perf_counter()
                compat.recall(self.s, q, now, self.team)
                times.append((time.perf_counter() - t0) * 1000)
            p50s.append(_pct(times, 50))
            p95s.append(_pct(times, 95))
            all_ms += times
        if profile is not None:
            self.out[f"profile_recall_day{d + 1}"] = self._stop_profile(profile, f"recall-day{d + 1}")
        return {
            "queries": len(all_ms),
            "p50_ms": round(statistics.median(p50s), 2),
            "p95_ms": round(statistics.median(p95s), 2),
            "rounds": self.cfg.recall_rounds,
        }

    def _recall_paired(self, last_day: int) -> dict[str, Any]:
        """Recall on the store as it is now against a *day-1 twin*, timed under the same load.

        ``day1`` and ``dayN`` above are timed minutes apart, and on a shared machine the load between
        them moves p95 more than the store's age does (BENCHMARKS.md: 1.05 - 1.39 for the same code).
        Here day 1 is replayed into a twin team of the same stores (its messages and pinned facts under
        another team name, then its first night), and each query is asked of both teams back to back,
        in alternating order: the ratio of their p95s compares the stores' ages, not the machine's
        moments. Done last, so the twin changes no other figure of the run."""
        from ops.bench.compat import run_night

        twin = f"{self.team}-day1"[:48]
        eps = [{**e, "team": twin} | ({"id": f"{e['id']}-day1"} if "id" in e else {}) for e in self.data.days[0]]
        for batch, at in self._batches(eps):  # not through _ingest: the run's ingest totals are reported
            self._ingestor(lambda at=at: at).ingest_lines([json.dumps(e, ensure_ascii=False) for e in batch], "twin")
        if self.data.gold is not None:
            self._pin_facts(twin)
        run_night(
            settings=self.s.settings,
            graph=self.s.graph,
            vectors=self.s.vectors,
            embedder=self.s.embedder,
            llm=self.llm,
            now=night_of(self.cfg.start),
            trigger="schedule",
            teams=[twin],
        )
        sides = {
            "now": (self.team, night_of(self.cfg.start + timedelta(days=last_day)) + timedelta(hours=7), []),
            "day1": (twin, night_of(self.cfg.start) + timedelta(hours=7), []),
        }
        qs = self.data.queries
        time.sleep(SETTLE_S)
        for team, now, _ in sides.values():  # warm up both
            for i in range(self.cfg.recall_queries):
                compat.recall(self.s, qs[i % len(qs)], now, team)
        times: dict[str, list[float]] = {k: v[2] for k, v in sides.items()}
        for r in range(self.cfg.recall_rounds * 2):
            order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
            for i in range(self.cfg.recall_queries):
                q = qs[i % len(qs)]
                for _key, (team, now, acc) in order:
                    t0 = time.perf_counter()
                    compat.recall(self.s, q, now, team)
                    acc.append((time.perf_counter() - t0) * 1000)
        now_p95, day1_p95 = _pct(times["now"], 95), _pct(times["day1"], 95)
        return {
            "day": last_day + 1,
            "queries_each": len(times["now"]),
            "now_p50_ms": round(_pct(times["now"], 50), 2),
            "now_p95_ms": round(now_p95, 2),
            "day1_p50_ms": round(_pct(times["day1"], 50), 2),
            "day1_p95_ms": round(day1_p95, 2),
            "p95_ratio": _ratio(now_p95, day1_p95),
        }

    def _watchdog_day(self, d: int) -> dict[str, Any]:
        from ops.bench.compat import run_night
        from taskzilla_sleep.night.watchdog import watchdog_due

        s = self.s.settings
        eps = self.data.days[d]
        if not eps:
            return {}
        poll = timedelta(seconds=s.worker.poll_s)
        clock = datetime.fromisoformat(eps[0]["ts"]) - poll
        end = datetime.fromisoformat(eps[-1]["ts"]) + timedelta(hours=2)
        i = 0
        lags: list[float] = []
        runs: list[dict[str, Any]] = []
        llm_before = _usage(self.llm)
        ingest_s = 0.0
        t0 = time.perf_counter()
        while clock <= end:
            j = i
            while j < len(eps) and datetime.fromisoformat(eps[j]["ts"]) <= clock:
                j += 1
            if j > i:
                ingest_s += self._ingest(eps[i:j], clock)
                i = j
            due, n = watchdog_due(self.s.graph, self.team, clock, s.watchdog)
            if due:
                t1 = time.perf_counter()
                at = clock
                llm0 = self.llm.wall_s
                res = run_night(
                    settings=s,
                    graph=self.s.graph,
                    vectors=self.s.vectors,
                    embedder=self.s.embedder,
                    llm=self.llm,
                    now=at,
                    steps=["distill"],
                    trigger="watchdog",
                    teams=[self.team],
                    lookback=timedelta(hours=s.watchdog.lookback_hours),
                    clock=lambda at=at: at,  # type: ignore[misc]
                )
                took = time.perf_counter() - t1
                lags += res.run.pattern_lags_s
                step = res.run.steps[0]
                runs.append(
                    {
                        "at": at.isoformat(),
                        "new_episodes": n,
                        "wall_s": round(took, 3),
                        "llm_wall_s": round(self.llm.wall_s - llm0, 3),
                        "llm_calls": step.llm_calls,
                        "patterns_added": step.counts.get("patterns_added", 0),
                        "lags_s": res.run.pattern_lags_s,
                    }
                )
                clock += timedelta(seconds=took)  # the worker's clock moves while it distills
            clock += poll
        u = _usage(self.llm)
        wall = [r["wall_s"] for r in runs]
        return {
            "day": d + 1,
            "episodes": len(eps),
            "distills": len(runs),
            "patterns": len(lags),
            "lag_p50_min": round(_pct(lags, 50) / 60, 1) if lags else None,
            "lag_p95_min": round(_pct(lags, 95) / 60, 1) if lags else None,
            "lag_max_min": round(max(lags) / 60, 1) if lags else None,
            "lags_s": sorted(lags),
            "distill_wall_p50_s": round(_pct(wall, 50), 2) if wall else None,
            "distill_wall_p95_s": round(_pct(wall, 95), 2) if wall else None,
            "llm_calls": u[0] - llm_before[0],
            "llm_calls_per_episode": _ratio(u[0] - llm_before[0], len(eps)),
            "ingest_s": round(ingest_s, 2),
            "simulated_s": round(time.perf_counter() - t0, 1),
            "runs": runs,
        }

    # -- profiling ------------------------------------------------------------------------------
    def _profiler(self) -> Any:
        if not self.cfg.profile:
            return None
        from pyinstrument import Profiler

        p = Profiler(interval=0.005)
        p.start()
        return p

    def _stop_profile(self, p: Any, name: str) -> str:
        p.stop()
        path = self.cfg.work / f"profile-{name}.txt"
        path.write_text(p.output_text(unicode=True, color=False, show_all=False))
        (self.cfg.work / f"profile-{name}.html").write_text(p.output_html())
        return str(path)


def _disk_mb(root: Path, exclude: str) -> float:
    """Bytes on disk of the stores (the embedded data dir, or the servers' dirs), in MB."""
    total = 0
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != exclude]
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(base, f)).st_size
    return round(total / 1e6, 1)


def _usage(llm: TimedLLM) -> tuple[int, int, int]:
    u = llm.usage
    return (int(u.calls), int(u.prompt_tokens), int(u.completion_tokens))


def _pct(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(len(v) - 1, int(k) + 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def _ratio(a: float, b: float, digits: int = 4) -> float:
    return round(a / b, digits) if b else 0.0
