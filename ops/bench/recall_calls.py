"""How many store calls one recall makes, per team of a bench store (BENCHMARKS.md, the recall ratio).

    python -m ops.bench.recall_calls WORK_DIR

WORK_DIR is a synthetic scenario's work folder after ``make bench`` (e.g.
``.tmp/bench/work/synthetic-falkordb``: ``data/`` and ``dataset/gold.json``), holding the team and its
day-1 twin. Each of the bench's recall questions is asked of every team once; the graph and vector
store calls are counted by method (episode queries by their ``n``) and printed per recall.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

COUNTED = ("pattern_cards", "patterns_by_id", "contradictions", "get_episodes", "mark_accessed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("work", type=Path)
    a = ap.parse_args(argv)
    from ops.bench.scenario import SYNTHETIC_QUERIES
    from taskzilla_sleep.app import build
    from taskzilla_sleep.logs import configure_logging
    from taskzilla_sleep.recall import recall
    from taskzilla_sleep.settings import load_settings

    configure_logging(level="warning")
    gold = json.loads((a.work / "dataset" / "gold.json").read_text())
    questions = [h["statement"] for h in gold["habits"]] + SYNTHETIC_QUERIES
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(a.work / "data"), "HF_HUB_OFFLINE": "1"})
    now = datetime.now(UTC)
    calls: collections.Counter[str] = collections.Counter()
    with build(settings) as s:

        def counted(name: str, f: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return f(*args, **kwargs)

            return wrapper

        for name in COUNTED:
            setattr(s.graph, name, counted(name, getattr(s.graph, name)))
        query = s.vectors.query

        def vector_query(team: str, kind: Any, text: str, n: int) -> Any:
            calls[f"chroma {kind} n={n}"] += 1
            return query(team, kind, text, n)

        s.vectors.query = vector_query  # type: ignore[method-assign]
        for team in s.graph.teams():
            calls.clear()
            for q in questions:
                recall(s.graph, s.vectors, q, now, teams=[team])
            per = {k: round(v / len(questions), 2) for k, v in sorted(calls.items())}
            graph = round(sum(v for k, v in per.items() if not k.startswith("chroma")), 2)
            print(f"{team}: {len(questions)} recalls; per recall: graph calls {graph}; {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
