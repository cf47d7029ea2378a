"""The offline provider: deterministic, no network. The default when no model is configured.

It is one provider behind the same interface as a model, with English rules as its own judgement
(never a filter in front of a model): it reads English only (``languages``) and learns only what it
can stand behind. Distill: of the topic it is shown, the messages its belief gate reads as
statements of a belief (beliefs.gate) are grouped again its own way (policies.group_episodes:
similarity, shared entities, rare topic words, never across a slot disagreement or a change cue);
each group of enough messages is one belief, stated as its most representative message (closest to
the centroid), with the kind from cue words, the subjects most of it mentions, and the group's
cohesion as the stated confidence. Reflect: similarity plus change/negation cues ("no longer",
"from now on", "instead of", "not … anymore", "switched to"): a change statement close to a plain
one contradicts it; near-identical statements are the same belief.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from taskzilla_sleep.core.models import Episode, Evidence, PatternKind, Provenance
from taskzilla_sleep.core.settings import DistillSettings
from taskzilla_sleep.llm.base import (
    MAX_STATEMENT_CHARS,
    DistillRequest,
    EpisodeView,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
    validate_draft,
)
from taskzilla_sleep.rules.beliefs import declarative, is_belief, slots, topics
from taskzilla_sleep.rules.beliefs.language import RULES_READ, rules_read
from taskzilla_sleep.rules.policies import (
    TOPIC_BONUS,
    VALUE_BONUS,
    Candidate,
    cohesion,
    content_words,
    disagree,
    group_episodes,
    is_change_statement,
    representative,
)
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


# Its own bar for "one thing said in other words": higher than the guard every provider passes (a
# belief's messages in the corpus: >= 0.73 for 95 % of them, in English).
OFFLINE_COHESION = 0.75
# A rule stated on one day only is learned when this many people state it (two people agreeing in
# one conversation are a thread, not the team's habit).
OFFLINE_SAME_DAY_PEOPLE = 3


class OfflineProvider:
    name = "offline"
    # The rules below stand in for both prompts; a change to them is a new version.
    prompt_ids: Mapping[str, str] = MappingProxyType({"distill": "offline-distill-v1", "reflect": "offline-reflect-v1"})

    languages: frozenset[str] | None = RULES_READ

    def __init__(self, embedder: Embedder, settings: DistillSettings | None = None) -> None:
        self._embedder = embedder
        self._s = settings or DistillSettings()
        self.usage = LLMUsage()

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        return [self._topic(r) for r in requests]

    def _topic(self, req: DistillRequest) -> tuple[PatternDraft, ...] | Unanswered:
        """The beliefs of one topic, each from a group of its own statements (its rules, in English)."""
        people = frozenset(req.people) or frozenset(e.author.casefold() for e in req.episodes)
        # Only statements of a belief support one (short rules included: "no deploys on Fridays"), and
        # only in a language its rules read.
        eps = [
            e
            for e in req.episodes
            if rules_read(e.text) and len(content_words(e.text)) >= 2 and is_belief(e.text, people)
        ]
        if len(eps) < req.min_support:
            return ()
        vectors = self._embedder.embed([e.text for e in eps])
        candidates = [
            Candidate(
                _episode(req.team, e),
                v,
                frozenset(e.entities),
                slots(e.text, e.entities, people, e.author),
                topics(e.text),
            )
            for e, v in zip(eps, vectors, strict=True)
        ]
        s = self._s
        found = group_episodes(
            candidates,
            s.similarity_threshold,
            min_size=req.min_support,
            topic_bonus=TOPIC_BONUS,
            value_bonus=VALUE_BONUS,
        )
        by_id = {e.id: (e, v) for e, v in zip(eps, vectors, strict=True)}
        drafts: list[PatternDraft] = []
        for g in found:
            members = [by_id[c.episode.id] for c in g.members]
            if not self._stands_behind([e for e, _ in members], [v for _, v in members], s.min_cohesion):
                continue
            d = self._distill(req, [e for e, _ in members], [v for _, v in members])
            if isinstance(d, Unanswered):
                return d
            drafts.append(d)
        return tuple(drafts)

    @staticmethod
    def _stands_behind(eps: Sequence[EpisodeView], vectors: Sequence[Sequence[float]], min_cohesion: float) -> bool:
        """What it learns, it can stand behind: several people on several days — or, the same
        morning, at least ``OFFLINE_SAME_DAY_PEOPLE`` people each saying it (a rule taught at 10:00
        that the watchdog makes recallable by 10:35) — and one thing said in other words, not a
        catch-all of people each saying something else (their statements close to their common
        centre)."""
        people = {e.author.casefold() for e in eps}
        days = {e.ts.date() for e in eps}
        if len(people) < 2 or (len(days) < 2 and len(people) < OFFLINE_SAME_DAY_PEOPLE):
            return False
        return cohesion(vectors) >= max(min_cohesion, OFFLINE_COHESION)

    def _distill(
        self, req: DistillRequest, eps: Sequence[EpisodeView], vectors: Sequence[Sequence[float]]
    ) -> PatternDraft | Unanswered:
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


def _episode(team: str, e: EpisodeView) -> Episode:
    """A message shown to it, as the grouping reads one (the fields it reads; nothing is stored)."""
    return Episode(
        id=e.id,
        team=team,
        channel=e.channel,
        author=e.author,
        text=e.text,
        ts=e.ts,
        provenance=Provenance(e.provenance),
        ingested_at=e.ts,
    )
