"""Threads in the DISTILL prompt: a reply is shown with a reference to the message it answers (its
number in the group, or that message quoted when it is not in the group); other lines are unchanged."""

from __future__ import annotations

import json
from datetime import timedelta

from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.llm.base import DistillRequest, EpisodeView
from taskzilla_sleep.llm.prompts.distill import distill_messages
from taskzilla_sleep.night.steps import distill
from tests.unit.steps.conftest import DAY, NIGHT, TEAM, Fake, belief_of_all, episode
from tests.unit.steps.test_distill import STATEMENT, rules


def view(i: str, text: str, **over: object) -> EpisodeView:
    base: dict[str, object] = {"id": i, "author": "sara", "channel": "dev", "ts": DAY, "text": text}
    return EpisodeView.model_validate(base | over)


def rows(request: DistillRequest) -> list[dict[str, object]]:
    user = distill_messages([request])[1]["content"]
    assert isinstance(user, str)
    return [json.loads(x) for x in user.splitlines() if x.startswith('{"n":')]


def test_a_reply_shows_the_number_or_the_text_of_the_message_it_answers() -> None:
    request = DistillRequest(
        team=TEAM,
        group_key="g",
        known_entities=(),
        episodes=(
            view("q", "do we deploy on Fridays?"),
            view("a", "no, never on Fridays", author="tom", reply_to="q"),
            view("b", "same here", author="ana", reply_to="elsewhere", answered="li: is the freeze still on?"),
            view("c", "Fridays are for docs", author="li"),
        ),
    )
    got = rows(request)
    assert [r.get("reply_to") for r in got] == [None, 1, "li: is the freeze still on?", None]
    # A message that answers nothing has exactly the fields it always had, in the same order.
    assert list(got[0]) == ["n", "time", "channel", "author", "provenance", "text"]
    assert list(got[1]) == ["n", "time", "channel", "author", "provenance", "reply_to", "text"]


def test_the_step_quotes_a_message_answered_outside_the_group(fake: Fake) -> None:
    question = episode(
        "q",
        "what is the limit for pull requests again?",
        "lea",
        at=DAY - timedelta(days=40),
        status=EpisodeStatus.ABSORBED,
    )
    said = rules()
    said[1] = said[1].model_copy(update={"reply_to": "ep-q", "thread_id": "ep-q"})
    fake.add(question, *said)
    fake.llm.beliefs = belief_of_all(STATEMENT)

    distill.read(fake.ctx(NIGHT))

    (asked,) = fake.llm.asked
    reply = next(e for e in asked.episodes if e.id == said[1].id)
    assert reply.answered == "lea: what is the limit for pull requests again?"
    assert all(e.answered is None for e in asked.episodes if e.id != said[1].id)
    assert "ep-q" not in {e.id for e in asked.episodes}
