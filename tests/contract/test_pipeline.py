"""``run_night`` on the embedded stores (FalkorDB + Chroma): order, failures, the ledger, dry runs, guards."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.errors import UsageError
from taskzilla_sleep.core.models import EpisodeIn, PatternStatus, Provenance, StepName
from taskzilla_sleep.core.settings import Settings, load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.llm.base import (
    DistillRequest,
    LLMProvider,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
)
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.memory import facts
from taskzilla_sleep.memory.ingest import Ingestor, Limits, WriteDiscipline
from taskzilla_sleep.night import pipeline
from taskzilla_sleep.night.pipeline import NightRequest, NightResult, parse_steps, run_night
from taskzilla_sleep.night.steps import ORDER, Step
from taskzilla_sleep.night.steps.base import StepContext
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.falkordb import open_falkordb
from taskzilla_sleep.stores.ports import Embedder

TEAM = "platform"
NIGHT = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
DAY = datetime.fromisoformat("2026-11-27T10:00:00+01:00")

SMALL_PRS = [
    ("martin", "Please keep PRs small, under 300 changed lines, so reviews stay quick."),
    ("sara", "Can we split big pull requests into smaller ones? Small PRs get reviewed the same day."),
    ("joost", "Reminder for everyone: small, scoped pull requests please, big PRs sit in review for days."),
    ("priya", "Keep your PRs small and focused, one change per pull request."),
]


class CountingProvider:
    """The offline provider, plus token accounting like a metered model (one call per request)."""

    name = "counting"
    prompt_ids = OfflineProvider.prompt_ids

    def __init__(self, inner: OfflineProvider) -> None:
        self._inner = inner
        self.usage = LLMUsage()

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        for r in requests:
            self.usage.add_call(100 * len(r.episodes), 20, 0.001)
        return self._inner.distill_many(requests)

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        for _ in requests:
            self.usage.add_call(50, 5, 0.0005)
        return self._inner.classify_many(requests)


class BrokenDistillProvider(OfflineProvider):
    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        raise RuntimeError("model endpoint exploded")


@dataclass
class Stack:
    settings: Settings
    graph: CypherGraphStore
    vectors: ChromaVectorStore
    embedder: Embedder
    llm: LLMProvider

    def night(self, now: datetime, *, dry_run: bool = False, steps: Sequence[StepName] | None = None) -> NightResult:
        return run_night(self, NightRequest(now=now, steps=steps, dry_run=dry_run))

    def ingestor(self, at: datetime) -> Ingestor:
        s = self.settings.ingest
        return Ingestor(
            self.graph,
            self.vectors,
            EntityExtractor(s.projects, s.tools),
            WriteDiscipline(s.write_discipline),
            Limits.of(s),
            lambda: at,
        )

    def ingest(self, rows: Sequence[tuple[str, str]], start: datetime, channel: str = "dev") -> list[str]:
        """``rows`` said over the days up to ``start`` (the last at ``start``, each 13 h after the one
        before): what several people say on several days is what a night learns."""
        items = [
            EpisodeIn(
                team=TEAM,
                channel=channel,
                author=author,
                text=text,
                ts=start - timedelta(hours=13 * (len(rows) - 1 - n)),
                provenance=Provenance.HUMAN,
            )
            for n, (author, text) in enumerate(rows)
        ]
        return self.ingestor(start + timedelta(hours=1)).ingest_items(items).new_ids

    def ingest_sample(self, at: datetime = NIGHT) -> None:
        self.ingestor(at).ingest_lines(sample_lines(), "sample")

    def snapshot(self) -> dict[str, Any]:
        vecs = {
            f"{t}/{k}": sorted(self.vectors.present(t, k))
            for t in self.vectors.teams()
            for k in ("episodes", "patterns")
        }
        return {"graph": self.graph.snapshot(skip_labels=frozenset()), "vectors": vecs}


@pytest.fixture
def stack(tmp_path: Path, offline_embedder: Embedder) -> Iterator[Stack]:
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})
    graph = open_falkordb(tmp_path / "f")
    try:
        vectors = ChromaVectorStore.embedded(tmp_path / "c", offline_embedder)
        try:
            graph.ensure_schema()
            yield Stack(settings, graph, vectors, offline_embedder, OfflineProvider(offline_embedder))
        finally:
            vectors.close()
    finally:
        graph.close()


def statuses(result: NightResult) -> list[tuple[str, str]]:
    return [(s.step, s.status) for s in result.run.steps]


def fact_props(stack: Stack, pid: str) -> dict[str, Any]:
    """The stored node, property by property (what "byte-identical" means for a graph record)."""
    (node,) = [n for n in stack.graph.snapshot()["nodes"] if n["props"].get("id") == pid and "Pattern" in n["labels"]]
    return dict(node["props"])


def recording_order(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """Replace the pipeline's steps by wrappers that record when each one plans."""

    def wrap(step: Step[Any, Any]) -> Step[Any, Any]:
        def read(ctx: StepContext, _inner: Callable[[StepContext], Any] = step.read) -> Any:
            calls.append(step.name)
            return _inner(ctx)

        return replace(step, read=read)

    monkeypatch.setattr(pipeline, "ORDER", tuple(wrap(s) for s in ORDER))


# -- parse_steps -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("decay,prune", ["prune", "decay"]),
        ("reflect, distill", ["distill", "reflect"]),
        ("decay,reflect,distill,prune", ["prune", "distill", "reflect", "decay"]),
        ("distill,distill", ["distill"]),
        ("prune,", ["prune"]),
    ],
)
def test_parse_steps_returns_cycle_order(raw: str, expected: list[str]) -> None:
    assert parse_steps(raw) == expected


@pytest.mark.parametrize("raw", [None, ""])
def test_no_steps_means_all_four(raw: str | None) -> None:
    assert parse_steps(raw) == ["prune", "distill", "reflect", "decay"]


@pytest.mark.parametrize("raw", ["prune,sleep", "Prune", "compact", "distill;reflect"])
def test_an_unknown_step_is_a_usage_error(raw: str) -> None:
    with pytest.raises(UsageError, match="unknown step"):
        parse_steps(raw)


# -- a failing step --------------------------------------------------------------------------------


def test_a_failing_step_stops_the_night_and_the_ledger_records_it(stack: Stack, offline_embedder: Embedder) -> None:
    stack.ingest(SMALL_PRS, DAY)
    stack.llm = BrokenDistillProvider(offline_embedder)
    result = stack.night(NIGHT)

    assert not result.ok
    assert statuses(result) == [("prune", "ok"), ("distill", "failed"), ("reflect", "skipped"), ("decay", "skipped")]
    failed = result.run.steps[1]
    assert failed.error == "RuntimeError: model endpoint exploded"
    assert failed.started_at is not None and failed.finished_at is not None
    assert all(s.error is None for s in result.run.steps if s.step != "distill")

    (stored,) = stack.graph.runs(5)
    assert stored.id == result.run.id and stored.finished_at is not None
    assert [(s.step, s.status) for s in stored.steps] == statuses(result)
    assert stored.steps[1].error == "RuntimeError: model endpoint exploded"
    # Nothing of the failed step was written: no pattern, no journal, nothing marked as distilled.
    assert stack.graph.patterns(TEAM) == []
    assert stack.graph.get_meta(f"last_distill_at:{TEAM}") is None
    assert not stack.graph.get_meta(f"distill_journal:{TEAM}")
    assert all(e.distilled_at is None for e in stack.graph.episodes_by_status(TEAM, ["raw"]))


def test_a_step_failing_later_keeps_what_earlier_steps_wrote(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.ingest(SMALL_PRS, DAY)

    def broken_plan(ctx: StepContext) -> Any:
        raise ValueError("reflect cannot read its watermark")

    order = tuple(replace(s, read=broken_plan) if s.name == "reflect" else s for s in ORDER)
    monkeypatch.setattr(pipeline, "ORDER", order)
    result = stack.night(NIGHT)

    assert statuses(result) == [("prune", "ok"), ("distill", "ok"), ("reflect", "failed"), ("decay", "skipped")]
    assert result.run.steps[2].error == "ValueError: reflect cannot read its watermark"
    assert result.run.steps[1].counts["patterns_added"] == 1
    assert len(stack.graph.patterns(TEAM)) == 1  # distill's work stays
    (stored,) = stack.graph.runs(5)
    assert [(s.step, s.status, s.error) for s in stored.steps] == [
        (s.step, s.status, s.error) for s in result.run.steps
    ]


# -- dry run ---------------------------------------------------------------------------------------


def test_a_dry_run_writes_nothing_not_even_a_run(stack: Stack) -> None:
    stack.ingest_sample()
    before = stack.snapshot()
    assert before["vectors"][f"{TEAM}/episodes"]  # there is something to change

    result = stack.night(NIGHT, dry_run=True)

    assert result.ok and result.run.dry_run
    assert stack.snapshot() == before
    assert stack.graph.runs(5) == []
    assert not any(n["labels"] == ["Run"] for n in stack.graph.snapshot(skip_labels=frozenset())["nodes"])
    assert result.run.steps[1].counts["patterns_added"] >= 3  # ... although the plan is not empty
    assert any(ln.startswith("+ pattern ") for p in result.plans["distill"] for ln in p.lines())


def test_a_dry_run_after_a_real_night_adds_no_run(stack: Stack) -> None:
    stack.ingest_sample()
    real = stack.night(NIGHT)
    before = stack.snapshot()
    stack.night(NIGHT + timedelta(days=4), dry_run=True)
    assert stack.snapshot() == before
    assert [r.id for r in stack.graph.runs(5)] == [real.run.id]


# -- step selection --------------------------------------------------------------------------------


def test_only_the_chosen_steps_run(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    recording_order(monkeypatch, calls)
    stack.ingest(SMALL_PRS, DAY)
    result = stack.night(NIGHT, steps=["prune", "decay"])
    assert calls == ["prune", "decay"]
    assert statuses(result) == [("prune", "ok"), ("decay", "ok")]
    assert stack.graph.patterns(TEAM) == []  # distill did not run


def test_run_night_runs_the_steps_in_cycle_order_whatever_order_they_are_given_in(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    recording_order(monkeypatch, calls)
    stack.ingest(SMALL_PRS, DAY)
    result = stack.night(NIGHT, steps=["decay", "prune"])
    assert calls == ["prune", "decay"]
    assert [s.step for s in result.run.steps] == ["prune", "decay"]


# -- the run ledger --------------------------------------------------------------------------------


def test_the_ledger_stores_counts_and_llm_usage_per_step(stack: Stack, offline_embedder: Embedder) -> None:
    stack.llm = CountingProvider(OfflineProvider(offline_embedder))
    stack.ingest_sample()
    result = stack.night(NIGHT)
    assert result.ok

    (stored,) = stack.graph.runs(5)
    assert stored.id == result.run.id and stored.now == NIGHT and not stored.dry_run
    by_step = {s.step: s for s in stored.steps}
    assert list(by_step) == ["prune", "distill", "reflect", "decay"]
    for live in result.run.steps:
        assert by_step[live.step].counts == live.counts
        assert by_step[live.step].status == "ok"

    distill, reflect = by_step["distill"], by_step["reflect"]
    assert distill.counts["groups"] > 0 and distill.counts["patterns_added"] >= 3
    assert distill.llm_calls == distill.counts["groups"]
    assert distill.completion_tokens == 20 * distill.llm_calls
    assert distill.prompt_tokens >= 100 * 3 * distill.llm_calls
    assert distill.cost_usd == pytest.approx(0.001 * distill.llm_calls)
    assert reflect.counts["compared"] > 0 and reflect.counts["contradictions"] == 1
    assert reflect.llm_calls == reflect.counts["compared"]
    assert (reflect.prompt_tokens, reflect.completion_tokens) == (50 * reflect.llm_calls, 5 * reflect.llm_calls)
    assert reflect.cost_usd == pytest.approx(0.0005 * reflect.llm_calls)
    for quiet in (by_step["prune"], by_step["decay"]):
        assert (quiet.llm_calls, quiet.prompt_tokens, quiet.completion_tokens) == (0, 0, 0)
        assert quiet.cost_usd == 0.0
    assert sum(s.llm_calls for s in stored.steps) == stack.llm.usage.calls


def test_runs_are_listed_newest_first(stack: Stack) -> None:
    stack.ingest(SMALL_PRS, DAY)
    first = stack.night(NIGHT)
    second = stack.night(NIGHT + timedelta(days=1), steps=["prune"])
    assert [r.id for r in stack.graph.runs(5)] == [second.run.id, first.run.id]
    assert [r.id for r in stack.graph.runs(1)] == [second.run.id]


# -- pinned facts ----------------------------------------------------------------------------------


def test_restating_a_pinned_fact_does_not_touch_it(stack: Stack) -> None:
    fact = facts.pin(
        stack.graph,
        stack.vectors,
        TEAM,
        "Martin Vos is the engineering manager of the platform team.",
        "martin",
        DAY - timedelta(days=1),
        "martin",
    )
    props_before = fact_props(stack, fact.id)
    stack.ingest(
        [
            ("sara", "Martin Vos is our engineering manager on the platform team."),
            ("joost", "Our engineering manager for the platform team is Martin Vos."),
            ("priya", "FYI Martin Vos is the platform team's engineering manager."),
        ],
        DAY,
        channel="random",
    )
    result = stack.night(NIGHT)
    assert result.ok

    distill = result.run.steps[1].counts
    assert distill["groups"] == 1 and distill["pinned_matches"] == 1
    assert distill["patterns_added"] == distill["evidence_bumps"] == 0
    assert result.run.steps[2].counts["merges"] == 0
    (after,) = stack.graph.patterns_by_id([fact.id])
    assert after == fact
    assert fact_props(stack, fact.id) == props_before
    assert [p.id for p in stack.graph.patterns(TEAM)] == [fact.id]
    assert stack.vectors.present(TEAM, "patterns") == {fact.id}


# -- stale beliefs ---------------------------------------------------------------------------------


def test_a_belief_not_seen_for_91_days_is_listed_as_stale_and_stays_active(stack: Stack) -> None:
    old_day = datetime.fromisoformat("2026-06-01T10:00:00+02:00")
    stack.ingest(SMALL_PRS, old_day)
    first = stack.night(old_day + timedelta(hours=17))
    assert first.ok
    (pat,) = stack.graph.patterns(TEAM)
    assert pat.status is PatternStatus.ACTIVE
    assert not first.notes.get("stale")

    almost = stack.night(pat.last_seen + timedelta(days=89))
    assert not almost.notes.get("stale")

    late = stack.night(pat.last_seen + timedelta(days=91))
    assert late.ok
    (line,) = late.notes["stale"]
    assert line.startswith(f"{pat.id}: ")
    assert late.run.steps[2].counts["stale"] == 1
    (after,) = stack.graph.patterns(TEAM)
    assert after.status is PatternStatus.ACTIVE and after.confidence == pat.confidence
    assert stack.vectors.present(TEAM, "patterns") == {pat.id}
    # Listed again the next night: never removed, never demoted.
    again = stack.night(pat.last_seen + timedelta(days=92))
    assert [ln.split(":", 1)[0] for ln in again.notes["stale"]] == [pat.id]
    (still,) = stack.graph.patterns(TEAM)
    assert still.status is PatternStatus.ACTIVE


def test_a_change_statement_against_a_pinned_fact_leaves_the_fact_byte_identical(stack: Stack) -> None:
    fact = facts.pin(
        stack.graph,
        stack.vectors,
        TEAM,
        "Martin Vos is the engineering manager of the platform team.",
        "martin",
        DAY - timedelta(days=1),
        "martin",
    )
    before = fact_props(stack, fact.id)
    stack.ingest(
        [
            ("sara", "From now on Sara Jansen is the engineering manager of the platform team instead of Martin."),
            ("joost", "Martin is no longer our engineering manager; Sara Jansen is the platform team's manager."),
            ("priya", "We switched to Sara Jansen as engineering manager of the platform team, not Martin anymore."),
        ],
        DAY,
        channel="random",
    )
    result = stack.night(NIGHT)
    assert result.ok, [(s.step, s.status, s.error) for s in result.run.steps]
    (after,) = stack.graph.patterns_by_id([fact.id])
    assert after.status is PatternStatus.ACTIVE and after.confidence == 1.0  # these two are guarded
    now = fact_props(stack, fact.id)
    changed = {k: (before.get(k), now.get(k)) for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
    assert changed == {}
