"""Judgement on real chat nobody tuned for: the first days of the Ubuntu IRC stream (BENCHMARKS.md, Judgement).

    python -m ops.bench.irc_quality [--days 5] [--irc-path FILE] [--work DIR] [--seed 10] [--json FILE] [--md FILE]

The stream is mapped as in ``ops/bench/irc.py`` and replayed day by day on fresh stores (embedded
FalkorDB + Chroma) with the default configuration and the offline provider: each day's messages are
ingested (in batches, the clock at each batch's last message), then the full night runs at 03:05.
Then, from the stores:

- patterns (tentative, active and contested) per 1,000 stored messages;
- the share of patterns that are **questions** (the statement, after a leading ``NICK:``/``NICK,``,
  ends with ``?`` or starts with an interrogative: who/which/whose/how, what/when/where/why before a
  verb, an auxiliary verb before a subject such as "is there", "does anyone", "can I", or
  "anyone"/"anybody"/"any idea") or
  **addressed replies** (the statement starts with ``NICK:`` or ``NICK,`` where NICK is an author of
  the replayed stream);
- the share of stored messages that were absorbed or retired;
- a seeded random sample of 30 patterns with statement, status, confidence and support, for a
  person to judge.

These definitions are the harness's own, written from the issue's words, not from the product's rules.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from ops.bench import compat

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

START = date(2026, 10, 12)
BATCH = 500
SAMPLE = 30

# "who/which/whose/whom/how" open a question; "what/when/where/why" only before a verb ("when is
# standup" asks, "when a printer jams, power-cycle it" states a rule). An auxiliary then a subject opens
# a yes/no question ("is there", "does anyone", "can I"); "do" only before a person ("do it now" is an
# order, "do you know" a question).
_AUX = r"is|are|was|were|am|does|did|can|could|will|would|should|shall|may|might|has|have|had|isn't|doesn't|can't"
_PERSON = r"i|you|u|we|they|anyone|anybody|someone|somebody"
_SUBJECT = _PERSON + r"|he|she|it|there|one"
_QUESTION_START = re.compile(
    rf"^(?:(?:who|which|whose|whom|how)\b|(?:what|when|where|why)(?:'s\b|s\b|\s+(?:{_AUX}|do|to)\b)"
    rf"|(?:{_AUX})\s+(?:{_SUBJECT})\b|do\s+(?:{_PERSON})\b|(?:anyone|anybody|any\s+ideas?)\b)",
    re.IGNORECASE,
)
_ADDRESSEE = re.compile(r"^\s*([^\s:,]+)\s*[:,]\s*")


def addressee(statement: str, authors: set[str]) -> str | None:
    """The author the statement is addressed to (``NICK: …`` / ``NICK, …``), or None."""
    m = _ADDRESSEE.match(statement)
    return m.group(1) if m and m.group(1).casefold() in authors else None


def is_question(statement: str, authors: set[str]) -> bool:
    text = statement.strip()
    m = _ADDRESSEE.match(text)
    if m and m.group(1).casefold() in authors:
        text = text[m.end() :]
    return text.rstrip().endswith("?") or _QUESTION_START.match(text.lstrip(" \t\"'(-*")) is not None


def figures(
    patterns: Iterable[dict[str, Any]], statuses: Iterable[str], stored: int, authors: Iterable[str], seed: int
) -> dict[str, Any]:
    """The issue's IRC figures from what the stores hold (patterns as dicts, episode statuses)."""
    who = {a.casefold() for a in authors}
    live = sorted((p for p in patterns if p["status"] in ("tentative", "active", "contested")), key=lambda p: p["id"])
    q = [p for p in live if is_question(p["statement"], who)]
    addressed = [p for p in live if addressee(p["statement"], who) is not None]
    either = {p["id"] for p in q} | {p["id"] for p in addressed}
    fates = Counter(statuses)
    gone = fates.get("absorbed", 0) + fates.get("retired", 0)
    sample = random.Random(seed).sample(live, min(SAMPLE, len(live)))
    return {
        "stored": stored,
        "patterns": len(live),
        "patterns_by_status": dict(Counter(p["status"] for p in live)),
        "patterns_per_1000": round(1000 * len(live) / stored, 1) if stored else None,
        "questions": len(q),
        "addressed": len(addressed),
        "questions_or_addressed": len(either),
        "questions_or_addressed_share": round(len(either) / len(live), 3) if live else None,
        "episodes_by_status": dict(sorted(fates.items())),
        "absorbed_or_retired": gone,
        "absorbed_or_retired_share": round(gone / stored, 4) if stored else None,
        "sample_seed": seed,
        "sample": [
            {
                "statement": p["statement"],
                "status": p["status"],
                "confidence": p["confidence"],
                "support": p["support"],
                "question": is_question(p["statement"], who),
                "addressed": addressee(p["statement"], who),
            }
            for p in sample
        ],
    }


def run(path: Path, days: int, work: Path, seed: int) -> dict[str, Any]:
    from ops.bench.compat import run_night
    from ops.bench.irc import TEAM, load
    from ops.bench.scenario import _rebucket, night_of
    from taskzilla_sleep.app import Services, build_graph, build_llm, build_vectors
    from taskzilla_sleep.core.logs import configure_logging
    from taskzilla_sleep.core.settings import Secrets, load_settings
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM

    configure_logging("warning", json=True)
    t0 = time.perf_counter()
    raw, info = load(path, days, START)
    per_day = _rebucket(raw, START)
    authors = {e["author"] for d in per_day for e in d}
    shutil.rmtree(work, ignore_errors=True)
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(work / "data")},
        overrides={"graph.backend": "falkordb", "vector.backend": "chroma-embedded"},
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    embedder = OfflineMiniLM()
    graph = build_graph(settings, Secrets())
    stored = 0
    nights = []
    with Services(settings, graph, build_vectors(settings, embedder), embedder) as s:
        s.graph.ensure_schema()
        llm = build_llm(settings, embedder)
        for d, eps in enumerate(per_day):
            for i in range(0, len(eps), BATCH):
                batch = eps[i : i + BATCH]
                at = datetime.fromisoformat(batch[-1]["ts"]) + timedelta(seconds=30)
                lines = [json.dumps(e, ensure_ascii=False) for e in batch]
                stored += len(s.ingestor(clock=lambda at=at: at).ingest_lines(lines, "irc").new_ids)
            res = run_night(
                settings=settings,
                graph=s.graph,
                vectors=s.vectors,
                embedder=embedder,
                llm=llm,
                now=night_of(START + timedelta(days=d)),
            )
            nights.append({"day": d + 1, "ok": res.ok, "errors": [r.error for r in res.run.steps if r.error]})
            print(f"[irc-quality] day {d + 1}: {len(eps)} messages, night ok={res.ok}", file=sys.stderr, flush=True)
        patterns = [
            {
                "id": p.id,
                "statement": p.statement,
                "status": p.status.value,
                "confidence": round(p.confidence, 2),
                "support": p.support_count,
            }
            for p in s.graph.patterns(TEAM)
        ]
        statuses = [str(r["status"]) for r in compat.read(s.graph,
            "MATCH (e:Episode) WHERE e.team = $team RETURN e.status AS status", {"team": TEAM}
        )]  # fmt: skip
    out = figures(patterns, statuses, stored, authors, seed)
    import taskzilla_sleep

    out.update(
        package=str(Path(taskzilla_sleep.__file__).resolve().parent),
        days=days,
        handed_in=info["episodes"],
        authors=len(authors),
        nights=nights,
        seconds=round(time.perf_counter() - t0, 1),
        source=str(path),
    )
    return out


def render(r: dict[str, Any]) -> str:
    st = ", ".join(f"{k} {v}" for k, v in sorted(r["patterns_by_status"].items()))
    eps = ", ".join(f"{k} {v}" for k, v in r["episodes_by_status"].items())
    out = [
        f"Ubuntu IRC, first {r['days']} days, default configuration, offline provider "
        f"({r['handed_in']} messages handed in, {r['authors']} authors; package {r.get('package')}):",
        "",
        "| figure | target | value |",
        "|---|---|---|",
        f"| stored messages | – | {r['stored']} ({eps}) |",
        f"| patterns (tentative + active + contested) | – | {r['patterns']} ({st}) |",
        f"| patterns per 1,000 stored messages | <= 5 | {r['patterns_per_1000']} |",
        f"| patterns that are questions or addressed replies | 0 | {r['questions_or_addressed']} "
        f"({r['questions']} questions, {r['addressed']} addressed; share {r['questions_or_addressed_share']}) |",
        f"| stored messages absorbed or retired | <= 2 % | {r['absorbed_or_retired']} "
        f"({100 * (r['absorbed_or_retired_share'] or 0):.1f} %) |",
        "",
        f"Random sample of {len(r['sample'])} patterns (seed {r['sample_seed']}), to be judged by a person:",
        "",
        "| # | status | conf. | support | q / addr. | statement |",
        "|---|---|---|---|---|---|",
    ]
    for n, p in enumerate(r["sample"], 1):
        flags = "/".join(x for x in ("q" if p["question"] else "", "@" if p["addressed"] else "") if x) or "–"
        text = " ".join(p["statement"].split()).replace("|", "\\|")
        out.append(f"| {n} | {p['status']} | {p['confidence']:.2f} | {p['support']} | {flags} | {text} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from ops.bench.irc import DEFAULT_PATH

    ap = argparse.ArgumentParser(description="IRC judgement figures")
    ap.add_argument("--days", type=int, default=5)
    ap.add_argument("--irc-path", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--work", type=Path, default=ROOT / ".tmp" / "irc-quality")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--package-root", type=Path, help="import taskzilla_sleep from this tree (a baseline)")
    a = ap.parse_args(argv)
    if a.package_root is not None:  # before anything imports the package
        sys.path.insert(0, str(a.package_root.resolve()))
    if not a.irc_path.is_file():
        ap.error(f"{a.irc_path} is not there (--irc-path)")
    r = run(a.irc_path, a.days, a.work, a.seed)
    text = render(r)
    print(text)
    for target, body in ((a.json, json.dumps(r, indent=1, ensure_ascii=False) + "\n"), (a.md, text + "\n")):
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
