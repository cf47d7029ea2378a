"""The oracle model (issue 28): an OpenAI-compatible server that answers DISTILL and REFLECT from gold.

    python -m ops.bench.oracle --gold FILE [--port N] [--stats FILE]
    python -m ops.bench.oracle --week w01 [--port N]          (the gold built from a hard-case week)

It serves on 127.0.0.1 until SIGTERM or Ctrl-C, printing its URL; point the product at it with
``--set llm.model=openai/oracle --set llm.api_base=http://127.0.0.1:N/v1``, so the whole model path
runs as with a real model (litellm, batching, validation, the guards after the answer). It answers
what a perfect model would, so anything the product then misses is the pipeline's loss:

- DISTILL: for each group, one belief per gold key that at least the group's minimum of its
  messages state (bot and ai-draft rows never count, and the gold maps no injection to a key):
  the gold statement, kind and evidence (``explicit_rule`` unless the gold says otherwise), those
  messages as support; the new side of a change with ``replaces`` (the old side's statement) and
  ``since`` (the gold's date, else its first supporting message's). At most the prompt's beliefs per
  group, the best-supported first: the keys left out are counted (``dropped``).
- REFLECT: each statement mapped back to its key (the gold statement, else the keys of the example
  messages the prompt shows, else none), then: the same key ``same``; a gold relation as listed (the
  old side of a change shown as the newer belief: ``contradicts``); anything else ``unrelated``.

What it was shown and could not express is kept in :class:`OracleStats` (``--stats FILE`` writes
it on exit); ``funnel`` turns it into the per-key figures the hard-case harness reports.

Prompt versions: each request is matched to a prompt id (the structured-output schema's name, else
the system prompt of the package's current prompts) and answered by ``ANSWERERS[id]``, where the
prompt-specific parsing lives (DISTILL v2 and REFLECT v2 read with ``prompt_data``). A new version
is one entry there; a request of a version without one gets HTTP 400 saying so.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops.bench import prompt_data
from ops.bench.oracle_gold import CORPUS, GoldError, OracleGold, build, load

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tests/ (the stub) lives beside the package
    sys.path.append(str(ROOT))

from tests.llm_stub import Reply, ScriptItem  # noqa: E402

NO_SUPPORT = frozenset({"bot", "ai-draft"})  # what the bot says is never a person's statement
_MAX_BELIEFS = re.compile(r"At most (\d+) beliefs per (?:group|topic)")


@dataclass
class OracleStats:
    """What the oracle was asked, what it answered and what it could not express."""

    distill_calls: int = 0
    groups: int = 0
    beliefs: int = 0
    reflect_calls: int = 0
    comparisons: int = 0
    relations: Counter[str] = field(default_factory=Counter)
    unmapped: int = 0  # REFLECT beliefs no key was found for (answered unrelated)
    reversed: int = 0  # a change's old side shown as the newer belief
    both_sides: int = 0  # groups holding enough of both sides of one change or disagreement
    unknown_prompts: Counter[str] = field(default_factory=Counter)
    shown: dict[str, set[str]] = field(default_factory=dict)  # key -> its gold messages shown in a group
    most_in_group: Counter[str] = field(default_factory=Counter)  # key -> most of its messages in one group
    answered: Counter[str] = field(default_factory=Counter)  # key -> groups it was answered in
    dropped: Counter[str] = field(default_factory=Counter)  # key -> groups whose belief limit left it out

    def as_dict(self) -> dict[str, Any]:
        return {
            "distill_calls": self.distill_calls,
            "groups": self.groups,
            "beliefs": self.beliefs,
            "reflect_calls": self.reflect_calls,
            "comparisons": self.comparisons,
            "relations": dict(self.relations),
            "unmapped": self.unmapped,
            "reversed": self.reversed,
            "both_sides": self.both_sides,
            "unknown_prompts": dict(self.unknown_prompts),
            "shown": {k: sorted(v) for k, v in sorted(self.shown.items())},
            "most_in_group": dict(sorted(self.most_in_group.items())),
            "answered": dict(sorted(self.answered.items())),
            "dropped": dict(sorted(self.dropped.items())),
        }


@dataclass(frozen=True)
class Row:
    """One message of a group as the request shows it."""

    n: int
    text: str
    provenance: str
    time: str = ""
    id: str | None = None


class Oracle:
    """The responder for ``tests.llm_stub.LLMStub``: a request body in, the answer (or an error) out."""

    def __init__(self, gold: OracleGold) -> None:
        self.gold = gold
        self.stats = OracleStats()
        self._lock = threading.Lock()  # the stub answers concurrent requests on its own threads

    def answer(self, body: dict[str, Any]) -> ScriptItem:
        pid = prompt_id(body)
        answerer = ANSWERERS.get(pid or "")
        if answerer is None:
            with self._lock:
                self.stats.unknown_prompts[pid or "unrecognised"] += 1
            known = ", ".join(sorted(ANSWERERS))
            what = f"prompt {pid!r}" if pid else "a request that is none of the package's prompts"
            return Reply(status=400, content=f"oracle: no answerer for {what} (known: {known}); add one to ANSWERERS")
        return answerer(self, body)

    def called(self, prompt: str) -> None:
        with self._lock:
            if prompt == "distill":
                self.stats.distill_calls += 1
            else:
                self.stats.reflect_calls += 1

    # -- version-neutral judgements -----------------------------------------------------------

    def group_beliefs(self, rows: Sequence[Row], min_support: int, limit: int) -> list[dict[str, Any]]:
        """The beliefs of one group: one per gold key at least ``min_support`` of its rows state."""
        by_key: dict[str, list[Row]] = {}
        entries: dict[str, set[str]] = {}
        for r in rows:
            if r.provenance in NO_SUPPORT:
                continue
            hit = self.gold.match(r.text, r.id)
            if hit is None:
                continue
            entry, key = hit
            by_key.setdefault(key, []).append(r)
            entries.setdefault(key, set()).add(entry)
        enough = [k for k, rs in by_key.items() if len(rs) >= min_support]
        enough.sort(key=lambda k: (-len(by_key[k]), min(r.n for r in by_key[k])))
        kept, left = enough[:limit], enough[limit:]
        out = [self._belief(k, by_key[k]) for k in kept]
        with self._lock:
            self.stats.groups += 1
            self.stats.beliefs += len(out)
            for k, es in entries.items():
                self.stats.shown.setdefault(k, set()).update(es)
                self.stats.most_in_group[k] = max(self.stats.most_in_group[k], len(by_key[k]))
            self.stats.answered.update(kept)
            self.stats.dropped.update(left)
            self.stats.both_sides += sum(1 for r in self.gold.relations if r.old in enough and r.new in enough)
        return out

    def _belief(self, key: str, rows: Sequence[Row]) -> dict[str, Any]:
        b = self.gold.beliefs[key]
        old = self.gold.replaced_by(key)
        since = None
        if old is not None:
            dates = sorted(r.time[:10] for r in rows if r.time)
            since = b.since.isoformat() if b.since else (dates[0] if dates else None)
        return {
            "reason": f"oracle: messages {', '.join(str(r.n) for r in rows)} state gold key {key}",
            "statement": b.statement,
            "kind": b.kind,
            "evidence": b.evidence,
            "subjects": [],
            "support": sorted(r.n for r in rows),
            "replaces": self.gold.beliefs[old].statement if old is not None else None,
            "since": since,
        }

    def key_of_belief(self, statement: str, examples: Iterable[str] = ()) -> str | None:
        """A REFLECT belief's key: its statement's, else the key most of its example messages state."""
        key = self.gold.key_of_statement(statement)
        if key is not None:
            return key
        keys = Counter(hit[1] for x in examples if (hit := self.gold.match(x)) is not None)
        return keys.most_common(1)[0][0] if keys else None

    def relations(self, new: str | None, olds: Sequence[str | None]) -> list[str]:
        out = [self.gold.relation(new, o) for o in olds]
        with self._lock:
            self.stats.comparisons += len(olds)
            self.stats.relations.update(out)
            self.stats.unmapped += (new is None) * len(olds) + sum(o is None for o in olds)
            changes = {(r.old, r.new) for r in self.gold.relations if r.relation == "supersedes"}
            self.stats.reversed += sum((new, o) in changes for o in olds)  # NEW is the old side
        return out


# -- prompt versions ---------------------------------------------------------------------------------


def prompt_id(body: Mapping[str, Any]) -> str | None:
    """``distill-v2``, ``reflect-v2``…: from the structured-output schema's name, else the system prompt."""
    rf = body.get("response_format")
    schema = rf.get("json_schema") if isinstance(rf, dict) else None
    name = schema.get("name") if isinstance(schema, dict) else None
    if isinstance(name, str) and "_" in name:
        base, _, version = name.rpartition("_")
        return f"{base}-{version}"
    system = next((str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"), None)
    from taskzilla_sleep.llm.prompts.distill import DISTILL
    from taskzilla_sleep.llm.prompts.reflect import REFLECT

    return next((p.id for p in (DISTILL, REFLECT) if system == p.system), None)


def _distill_v2(oracle: Oracle, body: dict[str, Any]) -> str:
    system = next((str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system"), "")
    m = _MAX_BELIEFS.search(system)
    limit = int(m.group(1)) if m else 3  # v2's rule 2 ("At most 3 beliefs per group")
    oracle.called("distill")
    out: dict[int, list[dict[str, Any]]] = {}
    for g in prompt_data.groups(body):
        rows = [
            Row(int(x["n"]), str(x.get("text", "")), str(x.get("provenance", "")), str(x.get("time", "")), x.get("id"))
            for x in g.messages
        ]
        out[g.number] = oracle.group_beliefs(rows, g.min_support, limit)
    return prompt_data.distill_answer(out)


def _reflect_v2(oracle: Oracle, body: dict[str, Any]) -> str:
    new, olds = prompt_data.beliefs(body)
    oracle.called("reflect")

    def key(view: Mapping[str, Any]) -> str | None:
        return oracle.key_of_belief(str(view.get("statement", "")), [str(x) for x in view.get("examples", [])])

    return prompt_data.reflect_answer(oracle.relations(key(new), [key(o) for o in olds]), "oracle: gold relation")


Answerer = Callable[[Oracle, dict[str, Any]], ScriptItem]
# DISTILL v3 asks about topics in v2's JSON (groups of numbered messages, the same answer shape).
ANSWERERS: dict[str, Answerer] = {"distill-v2": _distill_v2, "distill-v3": _distill_v2, "reflect-v2": _reflect_v2}


# -- what the pipeline let the oracle express, per key -------------------------------------------------


def funnel(
    ids: Mapping[str, Sequence[str]],
    texts: Mapping[str, str],
    stored: Iterable[str],
    passed: Iterable[str] | None,
    stats: OracleStats,
    min_support: int,
    written: Iterable[str] = (),
) -> dict[str, Any]:
    """Each gold key at the first stage it stopped at, and the messages at each stage.

    ``ids``: key -> the ids of the messages that may support it; ``stored``: ids the ingest stored;
    ``passed``: ids the gate lets through to grouping (None: not measured); ``written``: keys some
    pattern was written for. Stages: ``too_few`` (people state it fewer than ``min_support`` times:
    no group could ever support it), ``filtered`` (fewer than ``min_support`` of its messages left
    after the ingest and the gate), ``never_shown`` (no group held ``min_support`` of them),
    ``dropped`` (shown, but every group it had enough in was over the belief limit), ``answered``.
    """
    stored_ids, passed_ids = set(stored), None if passed is None else set(passed)
    stage: dict[str, str] = {}
    msgs = Counter[str]()
    for key, own in ids.items():
        usable = [i for i in own if i in stored_ids and (passed_ids is None or i in passed_ids)]
        shown = stats.shown.get(key, set())
        msgs["supportable"] += len(own)
        msgs["stored"] += sum(i in stored_ids for i in own)
        msgs["passed_gate"] += len(usable)
        msgs["shown"] += sum(texts.get(i) in shown or i in shown for i in own)
        if len(own) < min_support:
            stage[key] = "too_few"
        elif len(usable) < min_support:
            stage[key] = "filtered"
        elif stats.most_in_group[key] < min_support:
            stage[key] = "never_shown"
        elif not stats.answered[key]:
            stage[key] = "dropped"
        else:
            stage[key] = "answered"
    counts = Counter(stage.values())
    return {
        "keys": len(ids),
        "too_few": counts["too_few"],
        "filtered": counts["filtered"],
        "never_shown": counts["never_shown"],
        "dropped": counts["dropped"],
        "answered": counts["answered"],
        "written": len(set(written) & set(ids)),
        "written_keys": sorted(set(written) & set(ids)),
        "limit_drops": sum(stats.dropped.values()),
        "messages": dict(msgs) | ({} if passed_ids is not None else {"passed_gate": None}),
        "stage": dict(sorted(stage.items())),
        "most_in_group": {k: stats.most_in_group[k] for k in sorted(ids)},  # of its messages, in one group
        "calls": {"distill": stats.distill_calls, "reflect": stats.reflect_calls},
        "unknown_prompts": dict(stats.unknown_prompts),
    }


# -- the server ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="serve the oracle model (gold answers) on 127.0.0.1")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--gold", type=Path, help="a gold file (format: ops/bench/oracle_gold.py)")
    src.add_argument("--week", help="build the gold of this hard-case week (e.g. w01, w04-de)")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the hard-case corpus (with --week)")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    ap.add_argument("--stats", type=Path, help="write what the oracle was asked and answered here on exit")
    a = ap.parse_args(argv)
    try:
        gold = load(a.gold) if a.gold is not None else build(a.week, a.corpus).gold
    except GoldError as exc:
        print(f"oracle: {exc}", file=sys.stderr)
        return 2
    from tests.llm_stub import LLMStub

    oracle = Oracle(gold)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stub = LLMStub(default=oracle.answer, port=a.port).__enter__()
    except OSError as exc:
        print(f"oracle: cannot listen on 127.0.0.1:{a.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        source = a.gold or f"week {a.week}"
        print(f"oracle: {source}: {len(gold.beliefs)} beliefs, {len(gold.messages)} messages", flush=True)
        print(f"oracle: serving {stub.url} (model openai/oracle) until SIGTERM or Ctrl-C", flush=True)
        print(f"  --set llm.model=openai/oracle --set llm.api_base={stub.url}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        stub.stop()
    s = oracle.stats
    print(
        f"oracle: stopped; {s.distill_calls} distill calls ({s.groups} groups, {s.beliefs} beliefs, "
        f"{sum(s.dropped.values())} left out by the belief limit), {s.reflect_calls} reflect calls "
        f"({s.comparisons} comparisons: {', '.join(f'{k} {n}' for k, n in sorted(s.relations.items())) or 'none'})",
        flush=True,
    )
    if a.stats is not None:
        a.stats.parent.mkdir(parents=True, exist_ok=True)
        a.stats.write_text(json.dumps(s.as_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
