"""Plain data and in-memory stores for the steps' unit tests: no process, no network, no model.

``ScriptedModel`` answers as a test says (a belief per group, a verdict per pair); it judges
nothing, so these tests measure the steps' plumbing and pure decisions, not judgement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from taskzilla_sleep.core.models import (
    Episode,
    EpisodeStatus,
    Evidence,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
)
from taskzilla_sleep.core.settings import Settings, load_settings
from taskzilla_sleep.llm.base import DistillRequest, LLMUsage, PatternDraft, ReflectRequest, Unanswered, Verdict
from taskzilla_sleep.night.steps.base import StepContext, Vector
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore

TEAM = "platform"
NIGHT = datetime(2026, 11, 28, 2, 5, tzinfo=UTC)
DAY = NIGHT - timedelta(hours=16)

Answer = tuple[PatternDraft, ...] | Unanswered


@dataclass
class ScriptedModel:
    """An LLMProvider whose answers the test gives: ``beliefs(request)`` per group, ``verdict(request)``
    per pair. It records what it was asked."""

    beliefs: Callable[[DistillRequest], Answer] = lambda r: ()
    verdict: Callable[[ReflectRequest], Verdict | Unanswered] = lambda r: Verdict(relation="unrelated")
    name: str = "scripted"
    usage: LLMUsage = field(default_factory=LLMUsage)
    prompt_ids: dict[str, str] = field(default_factory=lambda: {"distill": "test-distill", "reflect": "test-reflect"})
    asked: list[DistillRequest] = field(default_factory=list)
    compared: list[ReflectRequest] = field(default_factory=list)

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[Answer]:
        self.asked.extend(requests)
        self.usage.add_call(len(requests), 1, 0.0)
        return [self.beliefs(r) for r in requests]

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        self.compared.extend(requests)
        return [self.verdict(r) for r in requests]


def belief_of_all(statement: str, kind: PatternKind = PatternKind.NORM) -> Callable[[DistillRequest], Answer]:
    """The model states ``statement``, supported by every message of the group, as an explicit rule."""

    def answer(r: DistillRequest) -> Answer:
        ids = tuple(e.id for e in r.episodes)
        return (
            PatternDraft(
                statement=statement,
                kind=kind,
                confidence=0.9,
                supporting_ids=ids,
                evidence=Evidence.EXPLICIT_RULE,
            ),
        )

    return answer


def episode(i: int | str, text: str, author: str = "martin", at: datetime = DAY, **over: Any) -> Episode:
    base: dict[str, Any] = {
        "id": f"ep-{i}",
        "team": TEAM,
        "channel": "dev",
        "author": author,
        "text": text,
        "ts": at,
        "provenance": Provenance.HUMAN,
        "ingested_at": at,
    }
    return Episode.model_validate(base | over)


def pattern(pid: str, statement: str, evidence: Sequence[Episode], **over: Any) -> Pattern:
    first = min((e.ts for e in evidence), default=DAY)
    last = max((e.ts for e in evidence), default=DAY)
    base: dict[str, Any] = {
        "id": pid,
        "team": TEAM,
        "statement": statement,
        "kind": PatternKind.NORM,
        "status": PatternStatus.ACTIVE,
        "confidence": 0.9,
        "evidence_ids": [e.id for e in evidence],
        "support_count": len(evidence),
        "distinct_authors": len({e.author for e in evidence}),
        "distinct_channels": len({e.channel for e in evidence}),
        "first_seen": first,
        "last_seen": last,
        "created_at": last,
        "updated_at": last,
        "valid_from": first,
    }
    return Pattern.model_validate(base | over)


def vector(text: str) -> Vector:
    return np.asarray(HashEmbedder().embed([text])[0], dtype=np.float64)


@dataclass
class Fake:
    """The in-memory stores with a step context builder."""

    settings: Settings
    graph: MemoryGraphStore
    vectors: MemoryVectorStore
    embedder: HashEmbedder
    llm: ScriptedModel

    def ctx(self, now: datetime = NIGHT, **over: Any) -> StepContext:
        return StepContext(
            TEAM,
            now,
            self.settings,
            self.graph,
            self.vectors,
            self.embedder,
            self.llm,
            **over,  # type: ignore[arg-type]
        )

    def add(self, *episodes: Episode) -> None:
        """Store episodes in both stores (graph first, as ingestion does), with their entity links."""
        ex = EntityExtractor()
        self.graph.upsert_episodes(episodes, [lk for e in episodes for lk in ex.links(e)])
        live = [e for e in episodes if e.status in (EpisodeStatus.RAW, EpisodeStatus.ABSORBED)]
        if live:
            self.vectors.upsert(TEAM, "episodes", [e.id for e in live], [e.text for e in live], [{}] * len(live))

    def add_pattern(self, p: Pattern) -> None:
        self.graph.write_pattern(p, [], [])
        self.vectors.upsert(TEAM, "patterns", [p.id], [p.statement], [{"kind": p.kind.value}])


@pytest.fixture
def fake() -> Iterator[Fake]:
    embedder = HashEmbedder()
    yield Fake(load_settings(env={}), MemoryGraphStore(), MemoryVectorStore(embedder), embedder, ScriptedModel())
