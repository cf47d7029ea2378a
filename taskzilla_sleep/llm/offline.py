"""The offline provider: deterministic, no network. The default when no model is configured.

Distill: the statement is the group's most representative episode (closest to the centroid),
the kind comes from cue words, the subjects are the entities most of the group mentions, and the
stated confidence is the group's cohesion. Reflect: similarity plus change/negation cues ("no
longer", "from now on", "instead of", "not … anymore", "switched to"): a change statement close
to a plain one contradicts it; near-identical statements are the same belief.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from taskzilla_sleep.beliefs import declarative, is_belief, slots
from taskzilla_sleep.llm.base import (
    MAX_STATEMENT_CHARS,
    DistillRequest,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
    validate_draft,
)
from taskzilla_sleep.models import Evidence, PatternKind
from taskzilla_sleep.policies import cohesion, content_words, disagree, is_change_statement, representative
from taskzilla_sleep.stores.ports import Embedder

_KIND_CUES: list[tuple[PatternKind, re.Pattern[str]]] = [
    (PatternKind.PREFERENCE, re.compile(r"\b(prefer|prefers|like|likes|rather|favou?r)\b", re.I)),
    (PatternKind.NORM, re.compile(r"\b(never|always|please|don't|do not|must|should|no \w+ on|freeze|keep)\b", re.I)),
    (PatternKind.PROCESS, re.compile(r"\b(every|each|before|after|at \d|handoff|standup|review|deploy|call)\b", re.I)),
]


def _kind(texts: Sequence[str]) -> PatternKind:
    joined = " ".join(texts)
    scores = {k: len(rx.findall(joined)) for k, rx in _KIND_CUES}
    best = max(scores.items(), key=lambda kv: (kv[1], -list(scores).index(kv[0])))
    return best[0] if best[1] > 0 else PatternKind.FACT


class OfflineProvider:
    name = "offline"
    # The rules below stand in for both prompts; a change to them is a new version.
    prompt_ids: Mapping[str, str] = MappingProxyType({"distill": "offline-distill-v1", "reflect": "offline-reflect-v1"})

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self.usage = LLMUsage()

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        out: list[tuple[PatternDraft, ...] | Unanswered] = []
        for r in requests:
            a = self._distill(r)
            out.append(a if isinstance(a, Unanswered) else () if a is None else (a,))
        return out

    def _distill(self, req: DistillRequest) -> PatternDraft | Unanswered | None:
        # Only statements of a belief support one (short rules included: "no deploys on Fridays").
        people = {e.author.casefold() for e in req.episodes}
        eps = [e for e in req.episodes if len(content_words(e.text)) >= 2 and is_belief(e.text, people)]
        if len({e.id for e in eps}) < req.min_support:
            return None
        vectors = self._embedder.embed([e.text for e in eps])
        # The statement comes from the most representative episode a person wrote (bots repeat).
        humans = [i for i, e in enumerate(eps) if e.provenance == "human"]
        pool = humans if humans else list(range(len(eps)))
        rep = eps[pool[representative([vectors[i] for i in pool])]]
        statement = declarative(rep.text)  # a belief in declarative form, never a question
        if len(statement) > MAX_STATEMENT_CHARS:
            statement = statement[: MAX_STATEMENT_CHARS - 1].rstrip() + "…"
        authors = {e.author.casefold() for e in eps}

        def mentions(name: str, text: str) -> bool:  # whole words: tool "ci" is not in "decide"
            return re.search(r"(?<![\w-])[@#]?" + re.escape(name) + r"(?![\w-])", text, re.IGNORECASE) is not None

        subjects = tuple(
            name
            for name in req.known_entities
            if name.casefold() not in authors and sum(mentions(name, e.text) for e in eps) * 2 > len(eps)
        )
        draft = PatternDraft(
            statement=statement,
            kind=_kind([e.text for e in eps]),
            subjects=subjects,
            confidence=round(min(1.0, 0.4 + 0.6 * cohesion(vectors)), 4),
            supporting_ids=tuple(e.id for e in eps),
            # Descriptive only (the confidence above is the group's cohesion): who said it, not how.
            evidence=Evidence.REPEATED_PRACTICE if len(authors) > 1 else Evidence.SINGLE_OPINION,
        )
        problem = validate_draft(req, draft)
        if problem is not None:
            self.usage.add("invalid_answers")
            return Unanswered(problem)
        return draft

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        return [self._classify(r) for r in requests]

    def _classify(self, req: ReflectRequest) -> Verdict:
        sim = req.similarity
        new_change = is_change_statement(req.new.statement)
        old_change = is_change_statement(req.old.statement)
        if new_change != old_change and sim >= 0.45:
            # A change announced: which of the two replaces the other is the dates' (and people's)
            # business, decided by policies.contradiction_kind for every provider.
            return Verdict(relation="supersedes", reason=f"a change of habit (similarity {sim:.2f})")
        slot = disagree(slots(req.new.statement), slots(req.old.statement), sim)
        if slot and sim >= 0.6:
            return Verdict(relation="contradicts", reason=f"they disagree on the {slot} (similarity {sim:.2f})")
        if sim >= 0.92:
            return Verdict(relation="same", reason=f"near-identical statements (similarity {sim:.2f})")
        if sim >= 0.75:
            return Verdict(relation="refines", reason=f"closely related (similarity {sim:.2f})")
        if sim >= 0.6:
            return Verdict(relation="compatible", reason=f"related (similarity {sim:.2f})")
        return Verdict(relation="unrelated", reason=f"similarity {sim:.2f}")
