"""The budgeted, time-boxed distill on plain data: the estimate, the gate, decide with deferred
groups, a read that asks the oldest first, the window's deadline, and the report's deferred line."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from taskzilla_sleep.core.settings import NightBudget, ScheduleSettings
from taskzilla_sleep.llm.base import DistillRequest, EpisodeView, LLMUsage
from taskzilla_sleep.llm.prompts.distill import distill_max_tokens, distill_messages
from taskzilla_sleep.night.budget import Estimate, Gate, batches, estimate, estimate_batch
from taskzilla_sleep.night.schedule import NightlySchedule
from taskzilla_sleep.night.steps import distill
from taskzilla_sleep.night.steps.distill.read import _ask
from taskzilla_sleep.observe.report.html import render_html
from taskzilla_sleep.observe.report.text import render_text
from tests.unit.steps.conftest import DAY, NIGHT, TEAM, Fake, belief_of_all, episode
from tests.unit.steps.test_distill import STATEMENT, inputs, rules
from tests.unit.test_report import make_run, sample_report


def request(n: int, size: int) -> DistillRequest:
    views = tuple(
        EpisodeView(id=f"e{n}-{i}", author=f"p{i}", channel="eng", ts=DAY, text=f"message {i} of group {n} " * 5)
        for i in range(size)
    )
    return DistillRequest(team=TEAM, group_key=f"g{n}", episodes=views, known_entities=(), min_support=3)


def test_the_estimate_batches_like_the_client_and_counts_chars_over_four() -> None:
    reqs = [request(0, 4), request(1, 2), request(2, 5), request(3, 3), request(4, 6)]  # g1 is too small to ask
    assert batches(reqs, 2) == [[0, 2], [3, 4]]
    got = estimate(reqs, 2, None)
    sent = [[reqs[0], reqs[2]], [reqs[3], reqs[4]]]
    chars = [sum(len(m["content"] or "") for m in distill_messages(b)) for b in sent]
    assert got == Estimate(
        groups=5,
        calls=2,
        prompt_tokens=sum(math.ceil(c / 4) for c in chars),
        completion_tokens=sum(distill_max_tokens(b) for b in sent),
        cost_usd=None,  # no model, no price
    )
    assert "5 group(s), 2 call(s)" in got.line() and "cost unknown" in got.line()
    assert estimate([], 8, None) == Estimate() and estimate_batch([]) == Estimate()


def test_a_call_holds_a_few_topics_or_one_big_one_never_more_messages_than_a_model_reads_well() -> None:
    reqs = [request(0, 100), request(1, 50), request(2, 10), request(3, 200), request(4, 2), request(5, 30)]
    assert batches(reqs, 8) == [[0, 1, 2], [3], [5]]  # 160 a call; a topic bigger than that alone
    assert batches(reqs, 2) == [[0, 1], [2], [3], [5]]


def test_the_estimate_is_priced_from_litellms_map_when_the_model_has_a_price() -> None:
    got = estimate([request(0, 4)], 8, "gpt-4o-mini")
    assert got.cost_usd is not None and got.cost_usd > 0
    assert estimate([request(0, 4)], 8, "openai/no-such-model-here").cost_usd is None


def test_the_gate_lets_through_what_fits_the_night_and_the_team_and_stops_at_the_window() -> None:
    one = Estimate(groups=1, calls=1, prompt_tokens=100, completion_tokens=50)
    now = [NIGHT]
    assert not Gate(NightBudget(), LLMUsage(), lambda: now[0], None).limited
    night = Gate(NightBudget(calls=3), LLMUsage(), lambda: now[0], None)
    assert night.limited and night.admit("a", [one] * 2) == (2, None)  # admitted: reserved at once
    with night.asking("a", [one] * 2):  # a provider that counts nothing: charged its estimate
        pass
    assert night.spent("a") == ((2, 300), (2, 300))
    assert night.admit("b", [one] * 2) == (1, "budget: calls")  # the night's budget is shared by the teams
    usage = LLMUsage()
    tokens = Gate(NightBudget(tokens=400, team_calls=2), usage, lambda: now[0], None)
    assert tokens.admit("a", [one] * 3) == (2, "budget: calls")
    with tokens.asking("a", [one] * 2):
        usage.add_call(20, 10, None)  # what the provider counted for these calls replaces the estimate
    assert tokens.spent("a") == ((1, 30), (1, 30)) and tokens.admit("a", [one] * 2) == (1, "budget: calls")
    assert tokens.admit("b", [one] * 3) == (1, "budget: tokens")  # 180 spent or reserved, +150, +150 > 400
    assert Gate(NightBudget(tokens=400), usage, lambda: now[0], None).admit("c", [one] * 3) == (2, "budget: tokens")
    window = Gate(NightBudget(), LLMUsage(), lambda: now[0], NIGHT + timedelta(minutes=30))
    assert window.limited and window.admit("a", [one] * 9) == (9, None)
    now[0] = NIGHT + timedelta(minutes=30)
    assert window.past_deadline() and window.admit("a", [one]) == (0, "window")


def test_decide_leaves_a_deferred_group_untouched_for_the_next_night(fake: Fake) -> None:
    members = rules()
    got = inputs(members, (), asked=(), deferred=(tuple(members),), deferred_reason="budget: tokens")
    plan = distill.decide(got, fake.settings, NIGHT)
    assert plan.marks == [] and plan.changes == []  # no distilled_at, no attempt, no decline remembered
    assert plan.seen.deferred_groups == 1 and plan.seen.declines_remembered == 0
    assert plan.counts()["deferred_groups"] == 1
    left = plan.deferral()
    assert left is not None and left.line() == f"{TEAM}: 1 group(s) deferred (budget: tokens), taken first next night"
    assert f"> {left.line()}" in plan.lines()


DOCS = [
    ("martin", "Keep design documents short, under 3 pages."),
    ("sara", "Please keep design documents short: under 3 pages."),
    ("joost", "Design documents stay short, under 3 pages please."),
    ("priya", "Short design documents only, under 3 pages."),
]


def test_a_budgeted_read_asks_the_oldest_group_first_and_the_next_night_the_rest(fake: Fake) -> None:
    old = [episode(f"d{i}", text, author, at=DAY - timedelta(days=2)) for i, (author, text) in enumerate(DOCS)]
    fake.add(*rules(), *old)
    fake.llm.beliefs = belief_of_all(STATEMENT)
    settings = fake.settings.model_copy(
        update={
            "llm": fake.settings.llm.model_copy(update={"batch_groups": 1, "max_concurrency": 1}),
            # Two topics (a window of 8 would be one): the rules and the docs messages.
            "distill": fake.settings.distill.model_copy(update={"topic_max_messages": 4}),
        }
    )
    fake.settings = settings
    gate = Gate(NightBudget(team_calls=1), fake.llm.usage, lambda: NIGHT, None)
    ctx = fake.ctx(gate=gate)
    got = distill.read(ctx)
    assert got.estimate.groups == 2 and got.estimate.calls == 2
    (asked,) = fake.llm.asked
    assert {e.id for e in asked.episodes} == {e.id for e in old}  # the oldest pending group first
    assert [{e.id for e in g} for g in got.deferred] == [{f"ep-r{i}" for i in range(4)}]
    plan = distill.decide(got, settings, NIGHT)
    distill.write(ctx, plan)
    assert {m.id for m in plan.marks} == {e.id for e in old}
    nxt = fake.ctx(NIGHT + timedelta(days=1))
    again = distill.read(nxt)
    assert {e.id for e in fake.llm.asked[-1].episodes} == {f"ep-r{i}" for i in range(4)} and not again.deferred


def test_asking_follows_the_oldest_pending_message_not_the_grouping_order(fake: Fake) -> None:
    fake.settings = fake.settings.model_copy(
        update={"llm": fake.settings.llm.model_copy(update={"batch_groups": 1, "max_concurrency": 1})}
    )
    ctx = fake.ctx(gate=Gate(NightBudget(calls=2), fake.llm.usage, lambda: NIGHT, None))
    reqs = [request(0, 3), request(1, 3), request(2, 3)]
    keys = [(DAY, "b"), (DAY - timedelta(days=3), "z"), (DAY, "a")]
    got, why = _ask(ctx, reqs, keys)
    assert [r.group_key for r in fake.llm.asked] == ["g1", "g2"] and sorted(got) == [1, 2] and why == "budget: calls"


def test_the_deadline_is_the_first_window_end_after_the_night_plus_the_grace() -> None:
    tz = ZoneInfo("Europe/Amsterdam")
    night = datetime(2026, 3, 29, 3, 5, tzinfo=tz)  # the night clocks go forward (02:00 -> 03:00)
    assert NightlySchedule(ScheduleSettings()).deadline(night) == datetime(2026, 3, 29, 3, 35, tzinfo=tz)
    tight = ScheduleSettings.model_validate({"window_end": "03:25", "window_grace_minutes": 0})
    assert NightlySchedule(tight).deadline(night) == datetime(2026, 3, 29, 3, 25, tzinfo=tz)


def test_the_report_shows_what_a_night_deferred(tmp_path: Path) -> None:
    run = make_run(1)
    run.steps[1].status = "deferred"
    run.steps[1].deferred = [f"{TEAM}: 3 group(s) deferred (window), taken first next night"]
    report = sample_report(tmp_path, [make_run(0), run])
    (night,) = [x for x in report.nights if x.deferred]
    assert night.status == "ok" and night.ran("distill")
    text = render_text(report)
    assert f"distill {TEAM}: 3 group(s) deferred (window), taken first next night" in text
    assert "defer " in text  # the step's cell in the cost table
    html = render_html(report)
    assert '<tr class="deferred">' in html and "deferred: distill platform: 3 group(s) deferred (window)" in html
