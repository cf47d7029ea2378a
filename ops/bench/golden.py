"""The golden cases: labelled DISTILL groups and REFLECT pairs through any provider (``make eval``).

``tests/golden/distill_groups.yaml`` and ``reflect_pairs.yaml`` were written by a helper that had
not read the product's rules (see their headers). This runs them through a provider and grades
what the product would act on:

- DISTILL: the provider's beliefs for the group, after the statement gate every answer passes in
  the distill step (``beliefs.statement_kind``). A case is right when every expected belief is
  matched by its own answer — its statement holds every ``mentions`` token (case-insensitive), its
  support holds at least ``min_support`` of the expected messages and none of ``must_not_support``,
  and it says what it ``replaces`` when the case is a change — and no other belief is answered.
- REFLECT: what the product does with the verdict after its slot guard (``steps.reflect.guard``):
  merge (same), link (refines, compatible), nothing (unrelated), or open a contradiction whose kind
  ``policies.contradiction_kind`` decides — ``supersedes`` is right when an update opens,
  ``contradicts`` when a disagreement does, whichever of the two relations the provider said.

Run: ``python -m ops.bench.golden`` (the offline provider), or with ``TASKZILLA_EVAL_MODEL`` set to
any litellm model (``TASKZILLA_EVAL_API_BASE`` for a local server) to grade that model through the
v2 prompts. Prints accuracy per case class and prompt id, and the failures with ``--failures``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from taskzilla_sleep.core.models import Episode, Pattern, PatternKind, Provenance
from taskzilla_sleep.llm.base import (
    DistillRequest,
    EpisodeView,
    LLMProvider,
    PatternDraft,
    PatternView,
    ReflectRequest,
    Unanswered,
)
from taskzilla_sleep.night.steps.reflect import guard
from taskzilla_sleep.rules.beliefs import Kind, statement_kind
from taskzilla_sleep.rules.policies import Span, contradiction_kind
from taskzilla_sleep.stores.ports import Embedder

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "golden"
_OUTCOME = {"supersedes": "update", "contradicts": "disagreement"}  # a conflict relation -> what opens
CONFLICT_SIMILARITY = 0.6  # reflect.conflict_similarity's default: the guard as a night applies it


class GoldenError(ValueError):
    """A golden file that cannot be read: which file, which case, which field, why."""


@dataclass
class Graded:
    prompt: str  # "distill" | "reflect"
    case: str
    cls: str
    ok: bool
    why: str = ""


@dataclass
class Scores:
    prompt_ids: dict[str, str]
    graded: list[Graded] = field(default_factory=list)

    def table(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(prompt id, class) -> (right, cases)."""
        out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for g in self.graded:
            cell = out[(self.prompt_ids[g.prompt], g.cls)]
            cell[0] += g.ok
            cell[1] += 1
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def accuracy(self, prompt: str) -> float:
        mine = [g for g in self.graded if g.prompt == prompt]
        return sum(g.ok for g in mine) / len(mine) if mine else 0.0

    def render(self, failures: int = 0) -> str:
        lines = ["| prompt | class | right | cases | accuracy |", "|---|---|---:|---:|---:|"]
        for (pid, cls), (right, n) in self.table().items():
            lines.append(f"| {pid} | {cls} | {right} | {n} | {right / n:.2f} |")
        for prompt in ("distill", "reflect"):
            n = sum(1 for g in self.graded if g.prompt == prompt)
            if n:
                lines.append(f"| {self.prompt_ids[prompt]} | **all** | | {n} | **{self.accuracy(prompt):.2f}** |")
        wrong = [g for g in self.graded if not g.ok][:failures]
        if wrong:
            lines += ["", "Failures:"] + [f"- {g.case} ({g.cls}): {g.why}" for g in wrong]
        return "\n".join(lines)


# -- loading ----------------------------------------------------------------------------------------


def load(name: str, directory: Path = GOLDEN) -> list[dict[str, Any]]:
    path = directory / name
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise GoldenError(f"{path}: cannot read: {exc}") from exc
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not cases:
        raise GoldenError(f"{path}: no 'cases' list")
    seen: set[str] = set()
    for i, c in enumerate(cases):
        where = f"{path}: case {i + 1} ({c.get('id', '?') if isinstance(c, dict) else '?'})"
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not isinstance(c.get("class"), str):
            raise GoldenError(f"{where}: needs an 'id' and a 'class'")
        if c["id"] in seen:
            raise GoldenError(f"{where}: duplicate id")
        seen.add(c["id"])
        if "expect" not in c:
            raise GoldenError(f"{where}: field 'expect' is missing")
    return cases


def _time(value: Any, where: str) -> datetime:
    try:
        t = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise GoldenError(f"{where}: not an ISO time with offset: {value!r}") from exc
    if t.tzinfo is None:
        raise GoldenError(f"{where}: time without an offset: {value!r}")
    return t


# -- DISTILL ----------------------------------------------------------------------------------------


def distill_request(case: dict[str, Any]) -> DistillRequest:
    msgs = case.get("messages") or []
    eps = tuple(
        EpisodeView(
            id=f"{case['id']}-{n}",
            author=str(m["author"]),
            channel=str(m["channel"]),
            ts=_time(m["time"], f"{case['id']} message {n}"),
            text=str(m["text"]),
            provenance=str(m.get("provenance", "human")),
        )
        for n, m in enumerate(msgs, 1)
    )
    names = sorted({e.author for e in eps} | {e.channel for e in eps})
    return DistillRequest(
        team="golden",
        group_key=case["id"],
        episodes=eps,
        known_entities=tuple(names),
        min_support=int(case.get("min_support", 3)),
        reference_time=_time(case["reference_time"], f"{case['id']} reference_time")
        if case.get("reference_time")
        else None,
    )


def grade_distill(case: dict[str, Any], req: DistillRequest, answer: tuple[PatternDraft, ...] | Unanswered) -> Graded:
    g = Graded("distill", case["id"], case["class"], False)
    if isinstance(answer, Unanswered):
        g.why = f"no usable answer: {answer.reason[:120]}"
        return g
    people = {e.author.casefold() for e in req.episodes}
    kept = [d for d in answer if statement_kind(d.statement, people) is Kind.BELIEF]
    number = {e.id: n for n, e in enumerate(req.episodes, 1)}
    expected = list((case.get("expect") or {}).get("beliefs") or [])
    free = list(kept)
    for k, want in enumerate(expected, 1):
        match = next((d for d in free if _matches(d, want, number, req.min_support)), None)
        if match is None:
            said = "; ".join(f"{d.statement[:70]!r} {sorted(number[i] for i in d.supporting_ids)}" for d in kept)
            g.why = f"expected belief {k} ({want.get('mentions')}) not answered; got: {said or 'none'}"
            return g
        free.remove(match)
    if free:
        g.why = "beliefs nobody stated: " + "; ".join(repr(d.statement[:80]) for d in free)
        return g
    g.ok = True
    return g


def _matches(d: PatternDraft, want: dict[str, Any], number: dict[str, int], min_support: int) -> bool:
    text = d.statement.casefold()
    if not all(str(t).casefold() in text for t in want.get("mentions") or []):
        return False
    cited = {number[i] for i in d.supporting_ids}
    if len(cited & set(want.get("support") or [])) < min(min_support, len(want.get("support") or [])):
        return False
    if cited & set(want.get("must_not_support") or []):
        return False
    return not want.get("replaces") or bool(d.replaces)


# -- REFLECT ----------------------------------------------------------------------------------------


def _side(case: dict[str, Any], which: str) -> tuple[Pattern, list[Episode], PatternView]:
    d = case[which]
    where = f"{case['id']} {which}"
    first, last = _time(d["first_seen"], f"{where}.first_seen"), _time(d["last_seen"], f"{where}.last_seen")
    authors = {str(k): int(v) for k, v in (d.get("authors") or {}).items()}
    pid = f"{case['id']}-{which}"
    # The supporting messages as reflect would read them from the graph: one per counted author
    # statement, between first and last seen (the examples' texts on the first two).
    eps: list[Episode] = []
    n = 0
    examples = [str(x) for x in d.get("examples") or []]
    total = max(1, sum(authors.values()))
    for author, count in authors.items():
        for _ in range(count):
            ts = first + (last - first) * (n / max(1, total - 1))
            eps.append(
                Episode(
                    id=f"{pid}-{n}",
                    team="golden",
                    channel="golden",
                    author=author,
                    text=examples[n] if n < len(examples) else "",
                    ts=ts,
                    provenance=Provenance.HUMAN,
                    ingested_at=ts,
                )
            )
            n += 1
    pattern = Pattern(
        id=pid,
        team="golden",
        statement=str(d["statement"]),
        kind=PatternKind(str(d.get("kind", "norm"))),
        confidence=0.85,
        evidence_ids=[e.id for e in eps],
        support_count=len(eps),
        distinct_authors=len(authors),
        first_seen=first,
        last_seen=last,
        created_at=last,
        updated_at=last,
        valid_from=first,
    )
    view = PatternView(
        id=pid,
        statement=pattern.statement,
        kind=pattern.kind,
        first_seen=first,
        last_seen=last,
        support=len(eps),
        authors=tuple(sorted(authors.items(), key=lambda kv: (-kv[1], kv[0]))),
        examples=tuple(examples[:2]),
    )
    return pattern, eps, view


def run(provider: LLMProvider, embedder: Embedder, directory: Path = GOLDEN) -> Scores:
    scores = Scores(prompt_ids=dict(provider.prompt_ids))
    dcases = load("distill_groups.yaml", directory)
    requests = [distill_request(c) for c in dcases]
    for c, r, a in zip(dcases, requests, provider.distill_many(requests), strict=True):
        scores.graded.append(grade_distill(c, r, a))

    rcases = load("reflect_pairs.yaml", directory)
    sides = [(_side(c, "new"), _side(c, "old")) for c in rcases]
    texts = [t for (n, o) in sides for t in (n[0].statement, o[0].statement)]
    vecs = np.asarray(embedder.embed(texts), dtype=np.float64)
    sims = [float(vecs[2 * i] @ vecs[2 * i + 1]) for i in range(len(rcases))]
    reqs = [
        ReflectRequest(team="golden", new=n[2], old=o[2], similarity=round(s, 4))
        for (n, o), s in zip(sides, sims, strict=True)
    ]
    verdicts = provider.classify_many(reqs)
    for c, ((new, new_eps, _), (old, old_eps, _)), sim, v in zip(rcases, sides, sims, verdicts, strict=True):
        scores.graded.append(_grade_reflect(c, new, new_eps, old, old_eps, sim, v))
    return scores


def _grade_reflect(
    c: dict[str, Any],
    new: Pattern,
    new_eps: Sequence[Episode],
    old: Pattern,
    old_eps: Sequence[Episode],
    sim: float,
    verdict: Any,
) -> Graded:
    g = Graded("reflect", c["id"], c["class"], False)
    acted = guard(verdict, new, old, sim, CONFLICT_SIMILARITY)
    if isinstance(acted, Unanswered):
        g.why = f"no usable answer: {acted.reason[:120]}"
        return g
    # Graded by what the product does: a conflict opens an update or a disagreement (by the dates
    # and the people, whichever of the two conflict relations the provider chose).
    allowed = {_OUTCOME.get(str(x), str(x)) for x in [c["expect"], *(c.get("accept") or [])]}
    did: str = acted.relation
    if did in ("supersedes", "contradicts"):
        did = contradiction_kind(did, Span.of(old, old_eps), Span.of(new, new_eps)).value
    if did not in allowed:
        g.why = f"{did} (expected {'/'.join(sorted(allowed))}; said {acted.relation}, similarity {sim:.2f}): "
        g.why += acted.reason[:100]
        return g
    g.ok = True
    return g


# -- command line -----------------------------------------------------------------------------------


def provider_from_env(embedder: Embedder) -> LLMProvider:
    model = os.environ.get("TASKZILLA_EVAL_MODEL", "").strip()
    if not model:
        from taskzilla_sleep.llm.offline import OfflineProvider

        return OfflineProvider(embedder)
    from taskzilla_sleep.llm.client import LiteLLMProvider

    return LiteLLMProvider(
        model=model,
        api_base=os.environ.get("TASKZILLA_EVAL_API_BASE") or None,
        timeout_s=float(os.environ.get("TASKZILLA_EVAL_TIMEOUT_S", "120")),
        max_retries=3,
        max_concurrency=2,
        temperature=0.0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.golden", description=__doc__.split("\n\n")[0])
    ap.add_argument("--failures", type=int, default=0, help="list up to N failed cases")
    ap.add_argument("--dir", type=Path, default=GOLDEN, help="folder with the two golden files")
    args = ap.parse_args(argv)
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM

    embedder = OfflineMiniLM()
    provider = provider_from_env(embedder)
    try:
        scores = run(provider, embedder, args.dir)
    except GoldenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"provider: {provider.name}; prompts: {', '.join(sorted(set(provider.prompt_ids.values())))}")
    print(scores.render(args.failures))
    usage = provider.usage.as_dict()
    print(f"llm calls {usage['calls']}, invalid answers {usage['invalid_answers']}, skipped {usage['skipped']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
