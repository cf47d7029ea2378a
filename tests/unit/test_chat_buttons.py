"""Resolving from chat, the pure parts: Slack's request signature (v0 HMAC-SHA256, 5-minute window,
replays refused), the buttons each channel gets (Slack Block Kit limits, Telegram's 64-byte
callback_data), the answer to a resolved alert, and the settings that switch it on. The same
against the running worker and a real HTTP receiver: tests/contract/test_chat_resolve.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest

from taskzilla_sleep.alerts.actions import (
    TELEGRAM_CALLBACK_MAX,
    digest,
    parse_slack_action,
    parse_telegram_callback,
    telegram_callback,
)
from taskzilla_sleep.alerts.message import AlertMessage, Section, format_resolution
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.alerts.render import (
    SLACK_BUTTON_TEXT_MAX,
    SLACK_MAX_BLOCKS,
    slack_payload,
    telegram_payload,
    utf16_len,
    webhook_payload,
)
from taskzilla_sleep.core.errors import BadRequest, ConfigError, Unauthorized
from taskzilla_sleep.core.models import ContradictionStatus
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.chatops.slack import SignatureCheck, parse_interaction, signature
from taskzilla_sleep.stores.memory import MemoryGraphStore
from tests.unit.steps.conftest import NIGHT
from tests.unit.test_outbox_and_lease import contradiction

SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
BODY = b"payload=%7B%22type%22%3A%22block_actions%22%7D"
T = 1_700_000_000


def test_the_signature_is_slacks_v0_hmac_sha256_of_version_timestamp_and_body() -> None:
    expected = "v0=" + hmac.new(SECRET, f"v0:{T}:".encode() + BODY, hashlib.sha256).hexdigest()
    assert signature(SECRET, str(T), BODY) == expected
    assert SignatureCheck(MemoryGraphStore(), clock=lambda: T + 10).verify(
        [b"other", SECRET], str(T), expected, BODY
    ) == [1]


@pytest.mark.parametrize(
    ("ts", "sig", "why"),
    [
        (str(T), "v0=" + "0" * 64, "does not match"),
        (str(T), None, "missing"),
        (None, "v0=abc", "missing"),
        ("yesterday", "v0=abc", "not a Unix time"),
        ("1" * 400, "v0=abc", "not a Unix time"),  # int() takes it; a float of it overflows (was a 500)
        (" " + str(T), "GOOD", "not a Unix time"),
        ("1_700_000_000", "GOOD", "not a Unix time"),
        ("\u0661" * 10, "GOOD", "not a Unix time"),  # Arabic-Indic digits: int() takes them too
        (str(T - 301), "GOOD", "more than 300 s"),  # stale: even a correct signature
        (str(T + 301), "GOOD", "more than 300 s"),
    ],
)
def test_a_request_is_refused_when_the_signature_or_its_time_is_wrong(
    ts: str | None, sig: str | None, why: str
) -> None:
    if sig == "GOOD":
        sig = signature(SECRET, str(ts), BODY)
    with pytest.raises(Unauthorized, match=why):
        SignatureCheck(MemoryGraphStore(), clock=lambda: T).verify([SECRET], ts, sig, BODY)


def test_a_replayed_signature_is_refused_within_the_window_and_a_body_change_breaks_it() -> None:
    now = [float(T)]
    check = SignatureCheck(MemoryGraphStore(), clock=lambda: now[0])
    sig = signature(SECRET, str(T), BODY)
    assert check.verify([SECRET], str(T), sig, BODY) == [0]
    with pytest.raises(Unauthorized, match="replayed"):
        check.verify([SECRET], str(T), sig, BODY)
    with pytest.raises(Unauthorized, match="does not match"):
        check.verify([SECRET], str(T), sig, BODY + b"x")
    now[0] = T + 400  # past the window the replay is stale anyway, and the memory of it is pruned
    with pytest.raises(Unauthorized, match="more than"):
        check.verify([SECRET], str(T), sig, BODY)


def _message(
    cid: str = "con_0123456789abcdef", sections: int = 4, console: str | None = "https://m.example/ui/x"
) -> AlertMessage:
    return AlertMessage(
        kind="contradiction",
        id=cid,
        team="platform",
        title="Contradiction in platform: people disagree " * 10,
        sections=tuple(Section(heading=f"part {i}", body="evidence " * 50) for i in range(sections)),
        console_url=console,
    )


def test_slack_gets_three_resolve_buttons_and_a_console_link_within_block_kit_limits() -> None:
    body = slack_payload(_message(), buttons=True)
    actions = body["blocks"][-1]
    assert actions["type"] == "actions"
    buttons = actions["elements"]
    assert [b["action_id"] for b in buttons] == ["tz_keep_new", "tz_keep_old", "tz_keep_both", "tz_open_console"]
    assert [b.get("value") for b in buttons[:3]] == ["con_0123456789abcdef"] * 3
    assert buttons[3]["url"] == "https://m.example/ui/x" and "value" not in buttons[3]
    assert all(len(b["text"]["text"]) <= SLACK_BUTTON_TEXT_MAX for b in buttons)
    assert [parse_slack_action(b["action_id"], b.get("value", "")) for b in buttons][3] is None
    assert parse_slack_action("tz_keep_old", "con_1").keep == "old"
    # Without interactivity (or for a summary) no buttons; without public_url no link.
    assert all(b["type"] != "actions" for b in slack_payload(_message(), buttons=False)["blocks"])
    no_link = slack_payload(_message(console=None), buttons=True)["blocks"][-1]["elements"]
    assert len(no_link) == 3


def test_a_message_longer_than_slacks_block_limit_keeps_its_buttons() -> None:
    body = slack_payload(_message(sections=80), buttons=True)
    assert len(body["blocks"]) == SLACK_MAX_BLOCKS
    assert body["blocks"][-1]["type"] == "actions" and body["blocks"][-2]["type"] == "context"


def test_telegram_callback_data_fits_64_bytes_and_a_long_id_goes_as_its_digest() -> None:
    short = telegram_callback("con_0123456789abcdef", "both")
    assert short == "tz:both:con_0123456789abcdef"
    assert parse_telegram_callback(short).ref == "con_0123456789abcdef"
    long_id = "imported-contradiction-" + "é" * 40
    data = telegram_callback(long_id, "new")
    assert len(data.encode()) <= TELEGRAM_CALLBACK_MAX
    click = parse_telegram_callback(data)
    assert click.is_digest and click.ref == digest(long_id) and click.keep == "new"
    body = telegram_payload(_message(), "-100", buttons=True)
    rows = body["reply_markup"]["inline_keyboard"]
    assert [b["callback_data"] for b in rows[0]] == [
        telegram_callback("con_0123456789abcdef", k) for k in ("new", "old", "both")
    ]
    assert rows[1] == [{"text": "Open in console", "url": "https://m.example/ui/x"}]
    assert all(len(b["callback_data"].encode()) <= TELEGRAM_CALLBACK_MAX for b in rows[0])
    assert "reply_markup" not in telegram_payload(_message(), "-100")


@pytest.mark.parametrize("data", ["", "tz:maybe:con_1", "other:new:con_1", "tz:new:"])
def test_a_callback_that_is_not_ours_is_a_clear_bad_request(data: str) -> None:
    with pytest.raises(BadRequest):
        parse_telegram_callback(data)


def test_a_slack_body_that_is_not_a_block_actions_interaction_is_a_bad_request() -> None:
    for body in (b"", b"payload=notjson", b"payload=%7B%22type%22%3A%22view_submission%22%7D", b"x=1"):
        with pytest.raises(BadRequest):
            parse_interaction(body)


def test_a_resolution_answers_each_delivered_alert_once_and_replies_to_the_telegram_message() -> None:
    graph = MemoryGraphStore()
    c = contradiction(graph)
    outbox = Outbox(graph)
    from taskzilla_sleep.core.settings import AlertChannel

    channels = {
        "team-slack": AlertChannel(kind="slack", url_env="X"),
        "tg": AlertChannel(kind="telegram", token_env="T", chat_id="-1"),
        "late": AlertChannel(kind="webhook", url_env="W"),
    }
    assert outbox.sync_contradictions(channels, NIGHT, public_url="https://m.example/") == 3
    assert outbox.list()[0].message.console_url == "https://m.example/ui/contradictions/con-1"
    assert outbox.mark_delivered(f"{c.id}:team-slack", NIGHT)
    assert outbox.mark_delivered(f"{c.id}:tg", NIGHT, "4711")  # "late" is still pending: no answer for it
    done = c.model_copy(
        update={"status": ContradictionStatus.RESOLVED, "resolution": "new", "resolved_by": "slack:U1 (ann)"}
    )
    assert outbox.answer_resolution(done, NIGHT + timedelta(minutes=1)) == 2
    assert outbox.answer_resolution(done, NIGHT + timedelta(minutes=2)) == 0  # a repeat queues nothing new
    answers = {a.channel: a for a in outbox.list("pending") if a.kind == "resolution"}
    assert sorted(answers) == ["team-slack", "tg"]
    tg = telegram_payload(answers["tg"].message, "-1", buttons=True)
    assert tg["reply_parameters"] == {"message_id": 4711, "allow_sending_without_reply": True}
    assert "resolved by slack:U1 (ann): kept new" in tg["text"] and "reply_markup" not in tg
    slack = slack_payload(answers["team-slack"].message, buttons=True)
    assert "resolved by slack:U1 (ann): kept new" in json.dumps(slack) and slack["blocks"][-1]["type"] != "actions"
    hook = webhook_payload(format_resolution(done, graph.patterns_by_id([c.old_pattern_id, c.new_pattern_id])), "k")
    assert hook["type"] == "resolution" and hook["resolution"] == "new" and hook["resolved_by"] == "slack:U1 (ann)"


SLACK_BUTTONS = {"kind": "slack", "url_env": "U", "signing_secret_env": "S", "channel_id": "C1"}
TG_BUTTONS = {"kind": "telegram", "token_env": "T", "chat_id": "-1", "webhook_secret_env": "S"}


def test_deciders_are_user_ids_of_the_channels_kind() -> None:
    both = {"s": SLACK_BUTTONS | {"deciders": ["U1234", "W0123ABCD"]}, "t": TG_BUTTONS | {"deciders": ["42"]}}
    channels = load_settings(env={}, overrides={"alerts.channels": both}).alerts.channels
    assert (channels["s"].deciders, channels["t"].deciders) == (["U1234", "W0123ABCD"], ["42"])


def test_an_alert_with_buttons_says_who_may_decide() -> None:
    slack = slack_payload(_message(), buttons=True, deciders=["U1234", "W0123ABCD"])
    assert slack["blocks"][-2]["elements"][0]["text"] == "Only <@U1234>, <@W0123ABCD> may decide."
    assert slack_payload(_message(), buttons=True)["blocks"][-2]["elements"][0]["text"] == (
        "Anyone in this channel may decide."
    )
    assert "may decide" not in json.dumps(slack_payload(_message(), buttons=False, deciders=["U1"]))
    tg = telegram_payload(_message(), "-1", buttons=True, deciders=["42", "7"])
    assert tg["text"].endswith(
        '<i>Only <a href="tg://user?id=42">user 42</a>, <a href="tg://user?id=7">user 7</a> may decide.</i>'
    )
    assert telegram_payload(_message(), "-1", buttons=True)["text"].endswith("<i>Anyone in this chat may decide.</i>")
    huge = telegram_payload(_message(sections=40), "-1", buttons=True, deciders=["42"])
    assert utf16_len(huge["text"]) <= 4096 and "may decide" in huge["text"]


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"alerts.channels": {"s": {"kind": "slack", "url_env": "U", "signing_secret_env": "S"}}}, "channel_id"),
        ({"alerts.channels": {"w": {"kind": "webhook", "url_env": "U", "signing_secret_env": "S"}}}, "for slack"),
        ({"alerts.channels": {"s": {"kind": "slack", "url_env": "U", "webhook_secret_env": "S"}}}, "for telegram"),
        ({"alerts.channels": {"s": {"kind": "slack", "url_env": "U", "deciders": ["U1234"]}}}, "resolve from"),
        ({"alerts.channels": {"s": SLACK_BUTTONS | {"deciders": ["alice"]}}}, "not a slack user id"),
        ({"alerts.channels": {"s": SLACK_BUTTONS | {"deciders": ["<!channel>"]}}}, "not a slack user id"),
        ({"alerts.channels": {"t": TG_BUTTONS | {"deciders": ["@bob"]}}}, "not a telegram user id"),
        ({"alerts.channels": {"t": TG_BUTTONS | {"deciders": ["U1234"]}}}, "not a telegram user id"),
        ({"api.public_url": "memory.example.com"}, "http"),
        ({"api.public_url": "https://user:pw@memory.example.com"}, "password"),
    ],
)
def test_chat_settings_refuse_what_cannot_work(over: dict[str, object], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        load_settings(env={}, overrides=over)
    assert (
        load_settings(env={}, overrides={"api.public_url": "https://m.example/"}).api.public_url == "https://m.example"
    )
