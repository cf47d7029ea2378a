"""How many store calls one recall makes, per team of a bench store, and (``--rounds``) how long
it takes, teams asked back to back (BENCHMARKS.md, the recall ratio).

    python -m ops.bench.recall_calls WORK_DIR [--rounds 10]

WORK_DIR is a synthetic scenario's work folder after ``make bench`` (e.g.
``.tmp/bench/work/synthetic-falkordb``: ``data/`` and ``dataset/gold.json``), holding the team and its
day-1 twin; a Neo4j pair's folder (``neo4j/``, ``chroma-server/``) is served again for the run.
Each of the bench's recall questions is asked of every team once; the graph and vector store calls
are counted by method (episode queries by their ``n``) and printed per recall.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops.bench import compat

COUNTED = (
    "pattern_cards",
    "patterns_by_id",
    "patterns_in_dispute",
    "contradictions",
    "get_episodes",
    "episode_cards",
    "mark_accessed",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--rounds", type=int, default=0, help="timed rounds of every question, teams back to back")
    a = ap.parse_args(argv)
    from ops.bench.scenario import SYNTHETIC_QUERIES, backend_settings
    from taskzilla_sleep.core.logs import configure_logging
    from taskzilla_sleep.core.settings import load_settings

    configure_logging(level="warning")
    gold = json.loads((a.work / "dataset" / "gold.json").read_text())
    questions = [h["statement"] for h in gold["habits"]] + SYNTHETIC_QUERIES
    # A Neo4j pair's store is served again from its folders (neo4j/, chroma-server/) for the run.
    pair = "neo4j+chroma-server" if (a.work / "neo4j").is_dir() else "falkordb+chroma-embedded"
    with backend_settings(pair, a.work) as over:
        env = {"TASKZILLA_DATA_DIR": str(a.work / "data"), "HF_HUB_OFFLINE": "1"}
        settings = load_settings(env=env, overrides=over)
        _count_and_time(settings, questions, a.rounds)
    return 0


def _count_and_time(settings: Any, questions: list[str], rounds: int) -> None:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.recall.select import same_text

    now = datetime.now(UTC)
    calls: collections.Counter[str] = collections.Counter()
    with build(settings) as s:

        def counted(name: str, f: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                got = f(*args, **kwargs)
                if name in ("get_episodes", "episode_cards"):  # the rows, and the distinct texts in them
                    eps = list(got.values()) if isinstance(got, dict) else got
                    calls["  episode rows"] += len(eps)
                    calls["  distinct texts"] += len({same_text(e.text) for e in eps})
                return got

            return wrapper

        originals = {name: getattr(s.graph, name) for name in COUNTED}
        for name in COUNTED:
            setattr(s.graph, name, counted(name, getattr(s.graph, name)))
        query = s.vectors.query

        def vector_query(team: str, kind: Any, text: str, n: int, *rest: Any, **kw: Any) -> Any:
            calls[f"chroma {kind} n={n}"] += 1
            return query(team, kind, text, n, *rest, **kw)

        s.vectors.query = vector_query  # type: ignore[method-assign]
        for team in s.graph.teams():
            calls.clear()
            for q in questions:
                compat.recall(s, q, now, team)
            per = {k: round(v / len(questions), 2) for k, v in sorted(calls.items())}
            graph = round(sum(v for k, v in per.items() if not k.startswith(("chroma", " "))), 2)
            print(f"{team}: {len(questions)} recalls; per recall: graph calls {graph}; {per}")
        if rounds > 0:
            for name, f in originals.items():
                setattr(s.graph, name, f)
            s.vectors.query = query  # type: ignore[method-assign]
            _timed(s, questions, now, rounds)


def _timed(s: Any, questions: list[str], now: datetime, rounds: int) -> None:
    teams = s.graph.teams()
    ms: dict[str, list[float]] = {t: [] for t in teams}
    for q in questions:  # warm up
        for team in teams:
            compat.recall(s, q, now, team)
    for r in range(rounds):
        order = teams if r % 2 == 0 else teams[::-1]
        for q in questions:
            for team in order:
                t0 = time.perf_counter()
                compat.recall(s, q, now, team)
                ms[team].append((time.perf_counter() - t0) * 1000)
    p95 = {t: statistics.quantiles(v, n=20)[-1] for t, v in ms.items()}
    for t, v in ms.items():
        print(
            f"{t}: {len(v)} recalls, p50 {statistics.median(v):.2f} ms, p95 {p95[t]:.2f} ms, "
            f"p95 / {teams[-1]}'s {p95[t] / p95[teams[-1]]:.3f}"
        )


if __name__ == "__main__":
    sys.exit(main())
