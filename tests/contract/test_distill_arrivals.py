"""What distill counts as new, and what it does with answers it cannot use, on both backend pairs.

- "New since the last night" means *arrived* since then, not *timestamped* after it: a backlog, an
  import of history or a connector catching up is distilled the next night.
- A question that got no usable answer is not a decision: its new messages stay pending and are
  asked about again the next night (at most ``distill.max_attempts`` times, then given up and
  reported); a step in which no question got a usable answer fails, like a 5xx.
- A crash in the middle of distill's writes is finished from its journal, not re-decided.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import pytest

from taskzilla_sleep.core.models import Episode, Pattern, PatternStatus
from taskzilla_sleep.llm.base import (
    DistillRequest,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
)
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.memory import contradictions
from taskzilla_sleep.night.steps.distill import retry
from tests.contract.test_cycle import NIGHT, TEAM, Stack

NEXT = NIGHT + timedelta(days=1)
MORNING = NIGHT + timedelta(hours=6)  # after the night that covers the late messages' timestamps

RELEASE_NOTES = [
    ("anna", "Release notes for every deploy go in #releases before the deploy starts."),
    ("joost", "Every deploy needs its release notes posted in #releases before it starts."),
    ("sara", "Please post the release notes of a deploy in #releases before you start it."),
    ("martin", "Before starting any deploy, post its release notes in #releases first."),
]
POSTMORTEMS = [
    ("lena", "Every incident gets a written postmortem within two days, no exceptions."),
    ("martin", "Write the incident postmortem within two days of every incident, please."),
    ("joost", "Postmortems for incidents are due within two days; every incident gets one."),
]


def _lines(rows: Sequence[tuple[str, str]], ts: datetime, channel: str = "ops") -> list[str]:
    return [
        json.dumps(
            {
                "team": TEAM,
                "channel": channel,
                "author": author,
                "text": text,
                "ts": (ts + timedelta(minutes=i)).isoformat(),
                "provenance": "human",
            }
        )
        for i, (author, text) in enumerate(rows)
    ]


def _learned_from(stack: Stack, ids: set[str]) -> list[Pattern]:
    return [p for p in stack.graph.patterns(TEAM) if len(set(p.evidence_ids) & ids) >= 3]


def test_messages_delivered_after_their_night_become_patterns_the_next_night(stack: Stack) -> None:
    stack.ingest_sample()
    first = stack.night(NIGHT)
    assert first.ok, [s.error for s in first.run.steps]
    # A connector catching up at 09:00: yesterday's messages, timestamped before the 03:05 night
    # that covered their day; and an import of history from three weeks ago (older than the window).
    late = stack.ingestor(MORNING).ingest_lines(_lines(RELEASE_NOTES, NIGHT - timedelta(hours=20)), "backlog")
    old = stack.ingestor(MORNING).ingest_lines(_lines(POSTMORTEMS, NIGHT - timedelta(days=21)), "history")
    assert late.new == len(RELEASE_NOTES) and old.new == len(POSTMORTEMS)

    result = stack.night(NEXT)
    assert result.ok, [s.error for s in result.run.steps]
    assert result.run.steps[1].counts["new_episodes"] == len(RELEASE_NOTES) + len(POSTMORTEMS)
    assert _learned_from(stack, set(late.new_ids)), [p.statement for p in stack.graph.patterns(TEAM)]
    assert _learned_from(stack, set(old.new_ids)), [p.statement for p in stack.graph.patterns(TEAM)]
    # Taken into account once: the night after, nothing of it is new again.
    again = stack.night(NEXT + timedelta(days=1))
    assert again.run.steps[1].counts["new_episodes"] == 0


class FlakyModel:
    """The offline model, except that some questions get no usable answer (as after a corrective
    retry that failed too); it remembers what it was asked."""

    name = "flaky"
    prompt_ids = OfflineProvider.prompt_ids

    def __init__(
        self,
        inner: OfflineProvider,
        distill_fails: Callable[[DistillRequest], bool] = lambda r: False,
        reflect_fails: Callable[[ReflectRequest], bool] = lambda r: False,
    ) -> None:
        self._inner = inner
        self._distill_fails = distill_fails
        self._reflect_fails = reflect_fails
        self.usage = LLMUsage()
        self.asked: list[str] = []  # every distill question's texts, joined

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        self.asked += [" ".join(e.text for e in r.episodes) for r in requests]
        answers = self._inner.distill_many(requests)
        return [
            Unanswered("scripted: not JSON") if self._distill_fails(r) else a
            for r, a in zip(requests, answers, strict=True)
        ]

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        verdicts = self._inner.classify_many(requests)
        return [
            Unanswered("scripted: not JSON") if self._reflect_fails(r) else v
            for r, v in zip(requests, verdicts, strict=True)
        ]


def _about_friday(r: DistillRequest) -> bool:
    return any("friday" in e.text.casefold() for e in r.episodes)


def _friday(stack: Stack) -> list[Pattern]:
    return [p for p in stack.graph.patterns(TEAM) if "friday" in p.statement.casefold()]


def _several_topics(stack: Stack, cap: int = 12) -> None:
    """The sample week fits in one topic (``distill.topic_max_messages``): one question, which fails
    whole. These tests are about one question failing while others are answered, so the week is
    offered in topics of at most ``cap`` messages (the Friday freeze in one, without the other habits)."""
    distill = stack.settings.distill.model_copy(update={"topic_max_messages": cap})
    stack.settings = stack.settings.model_copy(update={"distill": distill})


def test_a_group_without_a_usable_answer_is_asked_again_the_next_night(stack: Stack) -> None:
    _several_topics(stack)
    stack.ingest_sample()
    flaky = FlakyModel(stack.llm, distill_fails=_about_friday)
    first = stack.night(NIGHT, llm=flaky)
    assert first.ok, [s.error for s in first.run.steps]
    counts = first.run.steps[1].counts
    assert counts["skipped_groups"] == 1 and counts["retry_groups"] == 1 and counts["patterns_added"] >= 3
    assert _friday(stack) == []

    second = stack.night(NEXT)  # the model answers again
    assert second.ok, [s.error for s in second.run.steps]
    assert len(_friday(stack)) == 1 and _friday(stack)[0].support_count >= 3


def test_a_group_that_never_gets_a_usable_answer_is_given_up_and_reported(stack: Stack) -> None:
    _several_topics(stack)
    stack.ingest_sample()
    flaky = FlakyModel(stack.llm, distill_fails=_about_friday)
    tries = stack.settings.distill.max_attempts
    given_up, status = [], []
    for n in range(tries + 1):
        before = len(flaky.asked)
        result = stack.night(NIGHT + timedelta(days=n), llm=flaky)
        asked_friday = any("friday" in q.casefold() for q in flaky.asked[before:])
        assert asked_friday == (n < tries), (n, flaky.asked[before:])
        given_up.append(result.run.steps[1].counts.get("given_up_groups", 0))
        status.append(result.run.steps[1].status)
    assert given_up == [0] * (tries - 1) + [1, 0]
    # Night 1 had other questions answered; on the later nights the Friday group was the only question.
    assert status == ["ok"] + ["failed"] * (tries - 1) + ["ok"]
    assert _friday(stack) == []


def _friday_episodes(stack: Stack) -> list[Episode]:
    return [e for e in stack.graph.episodes_by_status(TEAM, ["raw"]) if e.distill_attempts or e.distill_night]


def test_an_outage_counts_once_a_night_however_often_the_night_runs(stack: Stack) -> None:
    """Issue 27 item 5: the night, its rerun, a run-once at noon and a watchdog pass over the whole
    window in the afternoon all get no usable answer for the Friday group: one failed night. Given up
    after ``distill.max_attempts`` distinct nights; `distill retry` (``release_given_up``) asks again."""
    stack.ingest_sample()
    flaky = FlakyModel(stack.llm, distill_fails=_about_friday)
    tries = stack.settings.distill.max_attempts
    for n in range(tries):
        night = NIGHT + timedelta(days=n)
        runs = [
            stack.night(night, llm=flaky),
            stack.night(night + timedelta(minutes=20), steps=["distill"], llm=flaky),
            stack.night(night + timedelta(hours=9), steps=["distill"], llm=flaky),
            stack.night(night + timedelta(hours=13), steps=["distill"], llm=flaky, trigger="watchdog"),
        ]
        friday = _friday_episodes(stack)
        assert len(friday) >= 3 and {e.distill_attempts for e in friday} == {n + 1}, [
            (e.id, e.distill_attempts, e.distill_night) for e in friday
        ]
        assert {e.distill_night for e in friday} == {night.date().isoformat()}
        given_up = [next(x for x in r.run.steps if x.step == "distill").counts["given_up_groups"] for r in runs]
        assert given_up == ([1, 0, 0, 0] if n + 1 == tries else [0] * 4)
        assert all((e.distilled_at is not None) == (n + 1 == tries) for e in friday)
    assert retry.given_up(stack.graph) == {TEAM: len(_friday_episodes(stack))}
    assert _friday(stack) == []

    assert retry.release_given_up(stack.graph, [TEAM]) == {TEAM: len(friday)}
    assert retry.given_up(stack.graph) == {}
    back = stack.graph.get_episodes([e.id for e in friday])
    assert {(e.distill_attempts, e.distill_night, e.distilled_at) for e in back} == {(0, None, None)}
    again = stack.night(NIGHT + timedelta(days=tries), llm=stack.llm)  # the model answers again
    assert again.ok, [s.error for s in again.run.steps]
    assert len(_friday(stack)) == 1 and _friday(stack)[0].support_count >= 3


def test_a_night_without_any_usable_answer_fails_and_the_rerun_learns(stack: Stack) -> None:
    stack.ingest_sample()
    broken = FlakyModel(stack.llm, distill_fails=lambda r: True)
    failed = stack.night(NIGHT, llm=broken)
    steps = {s.step: s for s in failed.run.steps}
    assert not failed.ok
    assert steps["distill"].status == "failed" and "no" in (steps["distill"].error or "")
    assert "usable answer" in (steps["distill"].error or "")
    assert steps["reflect"].status == "skipped" and steps["decay"].status == "skipped"
    assert stack.graph.patterns(TEAM) == []

    rerun = stack.night(NIGHT)
    assert rerun.ok, [s.error for s in rerun.run.steps]
    statements = " | ".join(p.statement.casefold() for p in stack.graph.patterns(TEAM))
    for habit in ("pr", "friday", "handoff"):
        assert habit in statements, statements
    assert len(stack.graph.contradictions(TEAM, "open")) == 1


def _about_voice(r: ReflectRequest) -> bool:
    return "voice" in (r.new.statement + r.old.statement).casefold()


def _without_the_slot_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standup pair disagrees on a time (9:30 vs 10:00), so reflect's slot guard decides it
    whatever the model answers (tests/contract/test_judgement.py); these tests are about the
    model's missing answers, so the guard is off."""
    monkeypatch.setattr("taskzilla_sleep.night.steps.reflect.guard", lambda verdict, *a: verdict)


def test_a_comparison_without_a_usable_answer_is_asked_again_the_next_reflect(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_the_slot_guard(monkeypatch)
    stack.ingest_sample()
    first = stack.night(NIGHT, llm=FlakyModel(stack.llm, reflect_fails=_about_voice))
    assert first.ok, [s.error for s in first.run.steps]
    assert first.run.steps[2].counts["unanswered"] >= 1
    assert stack.graph.contradictions(TEAM, "open") == []  # the standup change was not decided

    second = stack.night(NEXT)
    assert second.ok, [s.error for s in second.run.steps]
    (con,) = stack.graph.contradictions(TEAM, "open")
    (new,) = stack.graph.patterns_by_id([con.new_pattern_id])
    assert "voice" in new.statement.casefold() and new.reflect_attempts == 0


def test_a_reflect_without_any_usable_answer_fails(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    _without_the_slot_guard(monkeypatch)
    stack.ingest_sample()
    result = stack.night(NIGHT, llm=FlakyModel(stack.llm, reflect_fails=lambda r: True))
    steps = {s.step: s for s in result.run.steps}
    assert steps["distill"].status == "ok" and steps["reflect"].status == "failed"
    assert "usable answer" in (steps["reflect"].error or "") and steps["decay"].status == "skipped"
    again = stack.night(NIGHT)
    assert again.ok and len(stack.graph.contradictions(TEAM, "open")) == 1


def test_an_interrupted_distill_is_finished_from_its_journal(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.ingest_sample()
    real = stack.graph.write_pattern
    calls = {"n": 0}

    def failing(*args: object, **kw: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("backend went away")
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(stack.graph, "write_pattern", failing)
    broken = stack.night(NIGHT, steps=["distill"])
    assert not broken.ok and calls["n"] == 3
    planned = json.loads(stack.graph.get_meta(f"distill_journal:{TEAM}") or "{}")
    assert len(planned["changes"]) >= 4
    monkeypatch.setattr(stack.graph, "write_pattern", real)

    model = FlakyModel(stack.llm)
    rerun = stack.night(NIGHT + timedelta(hours=1), steps=["distill"], llm=model)
    assert rerun.ok and rerun.resumed == [f"distill:{TEAM}"]
    assert model.asked == []  # nothing decided again: every new message was taken into account by the plan
    assert not stack.graph.get_meta(f"distill_journal:{TEAM}")
    got = {p.id: p for p in stack.graph.patterns(TEAM)}
    for c in planned["changes"]:
        assert got[c["pattern"]["id"]] == Pattern.model_validate(c["pattern"])


def test_finishing_a_journal_never_overwrites_what_a_person_decided_since(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.ingest_sample()
    assert stack.night(NIGHT).ok
    (con,) = stack.graph.contradictions(TEAM, "open")
    # More voice-standup messages: tomorrow's distill bumps the (unconfirmed) voice belief ... Distill
    # bumps a belief only on shared evidence or the same statement (a merely similar one is a new
    # belief, for reflect to weigh): joost says it in the belief's own words, the others add to them.
    (said,) = stack.graph.patterns_by_id([con.new_pattern_id])
    voice = [
        ("joost", said.statement),
        ("anna", f"Reminder for the new folks: {said.statement}"),
        ("lena", f"{said.statement.rstrip('.')}, the invite is in your calendar."),
    ]
    stack.ingestor(NIGHT + timedelta(hours=8)).ingest_lines(_lines(voice, NIGHT + timedelta(hours=7), "standup"), "d")

    def crash(*args: object, **kw: object) -> None:
        raise RuntimeError("crashed right after the journal")

    monkeypatch.setattr(stack.graph, "write_pattern", crash)
    assert not stack.night(NEXT, steps=["distill"]).ok
    monkeypatch.undo()
    planned = json.loads(stack.graph.get_meta(f"distill_journal:{TEAM}") or "{}")
    assert {c["action"] for c in planned["changes"] if c["pattern"]["id"] == con.new_pattern_id} == {"bump"}
    # ... but before the rerun a person keeps the old belief: the voice belief is superseded.
    contradictions.resolve(stack.graph, stack.vectors, con.id, "old", "martin", None, NEXT + timedelta(hours=5), 0.8)
    rerun = stack.night(NEXT, steps=["distill"])
    assert rerun.ok and rerun.resumed == [f"distill:{TEAM}"]
    (voice_belief,) = stack.graph.patterns_by_id([con.new_pattern_id])
    assert voice_belief.status is PatternStatus.SUPERSEDED


def test_a_store_from_an_older_version_keeps_what_its_last_night_distilled(stack: Stack) -> None:
    # Older versions recorded a timestamp watermark and no per-episode mark: what was stored and
    # timestamped before it was distilled then and is not new; what arrived after it is.
    stack.ingest_sample(at=NIGHT - timedelta(hours=2))
    stack.graph.set_meta(f"distill_watermark:{TEAM}", str(int((NIGHT - timedelta(hours=1)).timestamp() * 1000)))
    late = stack.ingestor(MORNING).ingest_lines(_lines(RELEASE_NOTES, NIGHT - timedelta(hours=20)), "backlog")
    result = stack.night(NEXT)
    assert result.ok, [s.error for s in result.run.steps]
    assert result.run.steps[1].counts["new_episodes"] == len(RELEASE_NOTES)
    assert _learned_from(stack, set(late.new_ids))
