"""Resolving from chat against the running worker (uvicorn on 127.0.0.1, embedded FalkorDB and
Chroma) and a real local HTTP receiver standing in for Slack (incoming webhook, response_url) and
Telegram's Bot API: signed Slack button requests computed here with hmac, Telegram callbacks with
and without the webhook's secret header, and the alert answered after every resolution.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from taskzilla_sleep.app import build
from taskzilla_sleep.core.models import Contradiction, ContradictionKind, ContradictionStatus
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import OPEN
from tests.http_receiver import Received, Receiver
from tests.unit.steps.conftest import episode, pattern

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
SIGNING = "test-signing-secret-0123456789"
TG_SECRET = "tg-webhook-secret_42"
TG_TOKEN = "123456:tg-bot-token-secret-part"
PUBLIC = "https://memory.example.com"


@dataclass
class Live:
    url: str
    worker: Worker
    rx: Receiver

    def deliver(self) -> None:
        self.worker._alerts()  # the worker loop's own step: queue what is open, deliver what is due

    def contradiction(
        self, name: str, team: str = "platform", kind: ContradictionKind = ContradictionKind.DISAGREEMENT
    ) -> Contradiction:
        g = self.worker.services.graph
        eps = [episode(f"{name}-{i}", f"{name} standup rule {i}", team=team) for i in range(4)]
        g.upsert_episodes(eps, [])
        old = pattern(f"{name}-old", "Standups are async.", eps[:2], team=team)
        new = pattern(f"{name}-new", "Standup is a call.", eps[2:], team=team)
        for p in (old, new):
            g.write_pattern(p, [], [])
        c = Contradiction(
            id=f"con_{name}",
            team=team,
            old_pattern_id=old.id,
            new_pattern_id=new.id,
            kind=kind,
            opened_at=NOW,
        )
        g.open_contradiction(c, counter=2, old_confidence=0.5)
        return c

    def status(self, cid: str) -> Contradiction:
        return self.worker.services.graph.get_contradiction(cid)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
        req = urllib.request.Request(self.url + path, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def wait_for(self, prefix: str, n: int = 1) -> list[Received]:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = self.rx.received(prefix)
            if len(got) >= n:
                return got
            time.sleep(0.05)
        raise AssertionError(f"the receiver got {len(self.rx.received(prefix))} requests at {prefix}, wanted {n}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    rx = Receiver(body=b'{"ok": true, "result": {"message_id": 777}}').start()
    env = {
        "SLACK_PLATFORM_URL": rx.url("/slack/platform-hook"),
        "SLACK_INFRA_URL": rx.url("/slack/infra-hook"),
        "SLACK_SIGNING": SIGNING,
        "TG_TOKEN": TG_TOKEN,
        "TG_SECRET": TG_SECRET,
        "HOOK_URL": rx.url("/hook"),
        "TASKZILLA_TELEGRAM_API_BASE": rx.url("/tg"),
    }
    slack = {"kind": "slack", "signing_secret_env": "SLACK_SIGNING"}
    channels = {
        "platform-slack": slack
        | {"url_env": "SLACK_PLATFORM_URL", "channel_id": "CPLAT", "teams": ["platform"], "deciders": ["U042", "U777"]},
        "infra-slack": slack | {"url_env": "SLACK_INFRA_URL", "channel_id": "CINFRA", "teams": ["infra"]},
        "platform-tg": {
            "kind": "telegram",
            "token_env": "TG_TOKEN",
            "chat_id": "-1001",
            "webhook_secret_env": "TG_SECRET",
            "teams": ["platform"],
            "deciders": ["42"],
        },
        "hook": {"kind": "webhook", "url_env": "HOOK_URL"},
    }
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(tmp_path_factory.mktemp("chat"))},
        overrides={"alerts.channels": channels, "api.public_url": PUBLIC, "api.default_team": "platform"},
    )
    try:
        with build(settings) as services:
            worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env=env)
            url = worker.start_api()
            assert url is not None
            try:
                yield Live(url, worker, rx)
            finally:
                worker._server.should_exit = True
                if worker._api_thread is not None:
                    worker._api_thread.join(timeout=10)
    finally:
        rx.stop()


def slack_click(
    cid: str,
    keep: str,
    *,
    channel: str = "CPLAT",
    response: str,
    blocks: list[Any] | None = None,
    user: str = "U042",
) -> bytes:
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": "alice" if user == "U042" else "mallory", "team_id": "T1"},
        "channel": {"id": channel, "name": "platform"},
        "actions": [{"type": "button", "action_id": f"tz_keep_{keep}", "block_id": "tz_resolve", "value": cid}],
        "response_url": response,
        "message": {"blocks": blocks or []},
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


def signed(body: bytes, *, secret: str = SIGNING, ts: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": sig,
    }


def test_a_person_resolves_by_a_signed_slack_button_and_sees_the_alert_answered(live: Live) -> None:
    c = live.contradiction("slackdone")
    live.deliver()
    (alert,) = [r.json() for r in live.rx.received("/slack/platform-hook") if c.id in json.dumps(r.json())]
    actions = alert["blocks"][-1]
    assert [b["action_id"] for b in actions["elements"]] == [
        "tz_keep_new",
        "tz_keep_old",
        "tz_keep_both",
        "tz_open_console",
    ]
    assert actions["elements"][3]["url"] == f"{PUBLIC}/ui/contradictions/{c.id}"
    sent_tg = [r.json() for r in live.rx.received("/tg/") if c.id in json.dumps(r.json())]
    assert sent_tg[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == f"tz:new:{c.id}"

    body = slack_click(c.id, "new", response=live.rx.url("/slack/response/1"), blocks=alert["blocks"])
    status, _ = live.post("/chat/slack/interactions", body, signed(body))
    assert status == 200
    done = live.status(c.id)
    assert (done.status, done.resolution, done.resolved_by) == (
        ContradictionStatus.RESOLVED,
        "new",
        "slack:U042 (alice)",
    )
    # Slack's response_url: the alert replaced in place, its buttons gone, the decision shown.
    (update,) = live.wait_for("/slack/response/1")
    answer = update.json()
    assert answer["replace_original"] is True
    assert all(b["type"] != "actions" for b in answer["blocks"])
    assert "resolved by slack:U042 (alice): kept new" in answer["text"]

    before = len(live.rx.requests)
    live.deliver()  # the outbox answers every channel the alert went to
    answers = [r for r in live.rx.requests[before:] if c.id in r.body.decode()]
    by_path = {r.path.split("/")[1]: r.json() for r in answers}
    assert sorted(by_path) == ["hook", "slack", "tg"]
    assert "resolved by slack:U042 (alice): kept new" in by_path["slack"]["text"]
    assert by_path["tg"]["reply_parameters"]["message_id"] == 777  # threads under the Telegram alert
    assert by_path["hook"]["type"] == "resolution" and by_path["hook"]["resolved_by"] == "slack:U042 (alice)"

    # The same decision again over the API is a no-op 200 that posts nothing new.
    again = json.dumps({"keep": "new"}).encode()
    status, _ = live.post(f"/v1/contradictions/{c.id}/resolve", again, {"Content-Type": "application/json"})
    assert status == 200
    before = len(live.rx.requests)
    live.deliver()
    assert [r for r in live.rx.requests[before:] if c.id in r.body.decode()] == []


def test_a_wrong_stale_or_replayed_signature_is_refused_and_resolves_nothing(live: Live) -> None:
    c = live.contradiction("badsig")
    body = slack_click(c.id, "old", response=live.rx.url("/slack/response/bad"))
    for headers in (
        signed(body, secret="not-the-secret"),
        signed(body, ts=int(time.time()) - 301),  # correctly signed, but stale
        {"Content-Type": "application/x-www-form-urlencoded"},  # not signed at all
    ):
        status, err = live.post("/chat/slack/interactions", body, headers)
        assert status == 401, err
        assert live.status(c.id).status is ContradictionStatus.OPEN
    good = signed(body)
    tampered = slack_click(c.id, "new", response=live.rx.url("/slack/response/bad"))
    assert live.post("/chat/slack/interactions", tampered, good)[0] == 401  # the body is part of the signature
    assert live.post("/chat/slack/interactions", body, good)[0] == 200
    assert live.status(c.id).resolution == "old"
    status, err = live.post("/chat/slack/interactions", body, good)  # the very same request again
    assert status == 401 and "replayed" in err["error"]["message"]


def test_a_click_from_a_channel_not_routed_to_the_contradictions_team_is_refused(live: Live) -> None:
    c = live.contradiction("crossteam")  # team platform
    for channel in ("CINFRA", "CUNKNOWN"):  # infra's channel (same Slack app), and one not configured
        body = slack_click(c.id, "new", channel=channel, response=live.rx.url("/slack/response/x"))
        status, err = live.post("/chat/slack/interactions", body, signed(body))
        assert status == 403, err
        assert channel in err["error"]["message"]
        assert live.status(c.id).status is ContradictionStatus.OPEN


def tg_update(cid: str, keep: str, chat: int = -1001, user: int = 42) -> bytes:
    return json.dumps(
        {
            "update_id": 1,
            "callback_query": {
                "id": "cbq-1",
                "from": {"id": user, "is_bot": False, "first_name": "Bob", "username": "bob"},
                "message": {"message_id": 777, "chat": {"id": chat, "type": "supergroup"}},
                "chat_instance": "x",
                "data": f"tz:{keep}:{cid}",
            },
        }
    ).encode()


def test_a_telegram_button_resolves_only_with_the_webhooks_secret_header(live: Live) -> None:
    c = live.contradiction("telegram")
    body = tg_update(c.id, "both")
    for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
        status, _ = live.post("/chat/telegram/webhook", body, {"Content-Type": "application/json", **headers})
        assert status == 401
        assert live.status(c.id).status is ContradictionStatus.OPEN
    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TG_SECRET}
    before = len(live.rx.received(f"/tg/bot{TG_TOKEN}/answerCallbackQuery"))
    status, answer = live.post("/chat/telegram/webhook", body, headers)
    assert (status, answer["resolved"]) == (200, True)
    done = live.status(c.id)
    assert (done.resolution, done.resolved_by) == ("both", "telegram:42 (@bob)")
    calls = live.wait_for(f"/tg/bot{TG_TOKEN}/answerCallbackQuery", before + 1)
    assert calls[-1].json()["callback_query_id"] == "cbq-1"
    assert "kept both" in calls[-1].json()["text"]
    (edit, *_) = live.wait_for(f"/tg/bot{TG_TOKEN}/editMessageReplyMarkup")
    assert edit.json()["reply_markup"] == {"inline_keyboard": []} and edit.json()["message_id"] == 777
    # A chat that is not the channel's: told why in the callback answer, nothing changes.
    other = live.contradiction("tgother")
    status, answer = live.post("/chat/telegram/webhook", tg_update(other.id, "new", chat=-999), headers)
    assert (status, answer["resolved"]) == (200, False)
    assert live.status(other.id).status is ContradictionStatus.OPEN


def test_a_telegram_click_on_a_delivered_alert_rewrites_it_as_decided(live: Live) -> None:
    """As Slack's is updated: the alert clicked loses its keyboard and how to decide, and says who
    decided and what the bot now uses (one editMessageText, through the Bot API on the receiver)."""
    c = live.contradiction("tgdecided")
    live.deliver()  # the receiver answers sendMessage with message_id 777: the alert's message_ref
    sent = [r.json() for r in live.rx.received(f"/tg/bot{TG_TOKEN}/sendMessage") if c.id in r.body.decode()]
    assert sent and "How to resolve" in sent[-1]["text"]
    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TG_SECRET}
    before = len(live.rx.received(f"/tg/bot{TG_TOKEN}/editMessageText"))
    status, answer = live.post("/chat/telegram/webhook", tg_update(c.id, "new"), headers)
    assert (status, answer["resolved"]) == (200, True)
    edit = live.wait_for(f"/tg/bot{TG_TOKEN}/editMessageText", before + 1)[-1].json()
    assert (edit["message_id"], edit["reply_markup"], edit["parse_mode"]) == (777, {"inline_keyboard": []}, "HTML")
    assert "How to resolve" not in edit["text"] and "may decide" not in edit["text"]
    assert "resolved by telegram:42 (@bob): kept new" in edit["text"]
    assert "The bot now uses: “Standup is a call.”" in edit["text"]
    assert "Standups are async." in edit["text"]  # the alert's own account of both sides stays


def test_an_api_resolve_answers_the_delivered_alert_too(live: Live) -> None:
    c = live.contradiction("viaapi")
    live.deliver()
    body = json.dumps({"keep": "old", "note": "checked with Martin"}).encode()
    status, _ = live.post(f"/v1/contradictions/{c.id}/resolve", body, {"Content-Type": "application/json"})
    assert status == 200
    before = len(live.rx.requests)
    live.deliver()
    answers = [r.json() for r in live.rx.requests[before:] if c.id in r.body.decode()]
    assert len(answers) == 3  # platform Slack, platform Telegram, the every-team webhook
    assert all("resolved by anonymous: kept old (checked with Martin)" in json.dumps(a) for a in answers)


def test_a_slack_timestamp_of_400_digits_is_a_401_not_a_500(live: Live) -> None:
    c = live.contradiction("hugets")
    body = slack_click(c.id, "new", response=live.rx.url("/slack/response/huge"))
    for stamp in ("1" * 400, "9" * 4000, "+1700000000", "1_700_000_000"):
        status, err = live.post("/chat/slack/interactions", body, signed(body) | {"X-Slack-Request-Timestamp": stamp})
        assert status == 401, (stamp[:20], err)
        assert "not a Unix time" in err["error"]["message"]
    assert live.status(c.id).status is ContradictionStatus.OPEN


def test_each_alert_says_who_may_decide(live: Live) -> None:
    plat = live.contradiction("whodecides")
    infra = live.contradiction("whodecides-infra", team="infra")
    live.deliver()
    (alert,) = [r.json() for r in live.rx.received("/slack/platform-hook") if plat.id in json.dumps(r.json())]
    assert alert["blocks"][-2] == {
        "type": "context",
        "block_id": "tz_deciders",
        "elements": [{"type": "mrkdwn", "text": "Only <@U042>, <@U777> may decide."}],
    }
    (other,) = [r.json() for r in live.rx.received("/slack/infra-hook") if infra.id in json.dumps(r.json())]
    assert other["blocks"][-2]["elements"][0]["text"] == "Anyone in this channel may decide."
    (tg,) = [r.json() for r in live.rx.received("/tg/") if f"tz:new:{plat.id}" in json.dumps(r.json())]
    assert tg["text"].endswith('<i>Only <a href="tg://user?id=42">user 42</a> may decide.</i>')


def test_a_click_by_someone_not_among_the_deciders_is_not_allowed_and_changes_nothing(live: Live) -> None:
    c = live.contradiction("notadecider")
    body = slack_click(c.id, "new", response=live.rx.url("/slack/response/mallory"), user="U999")
    status, _ = live.post("/chat/slack/interactions", body, signed(body))
    assert status == 200  # Slack shows the person our answer, not an HTTP error
    (told,) = live.wait_for("/slack/response/mallory")
    assert told.json() == {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": f"Not allowed: only <@U042>, <@U777> may decide on {c.id} from here; nothing was changed",
    }
    assert live.status(c.id).status is ContradictionStatus.OPEN

    headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TG_SECRET}
    answers = f"/tg/bot{TG_TOKEN}/answerCallbackQuery"
    seen = len(live.rx.received(answers))
    status, answer = live.post("/chat/telegram/webhook", tg_update(c.id, "old", user=43), headers)
    assert (status, answer["resolved"]) == (200, False)
    call = live.wait_for(answers, seen + 1)[-1].json()
    assert call["text"].startswith(f"Not allowed: only 42 may decide on {c.id}") and call["show_alert"]
    assert live.status(c.id).status is ContradictionStatus.OPEN
    refused = [r for r in live.worker.memory.audit_records(OPEN, "platform", "resolve_refused") if c.id in r.ids]
    assert sorted(r.who for r in refused) == ["slack:U999 (mallory)", "telegram:43 (@bob)"]

    body = slack_click(c.id, "old", response=live.rx.url("/slack/response/alice"))  # a decider: done
    assert live.post("/chat/slack/interactions", body, signed(body))[0] == 200
    assert (live.status(c.id).resolution, live.status(c.id).resolved_by) == ("old", "slack:U042 (alice)")


def test_after_a_decision_chat_drops_how_to_decide_and_says_what_the_bot_now_uses(live: Live) -> None:
    c = live.contradiction("decided", kind=ContradictionKind.UPDATE)
    live.deliver()
    (alert,) = [r.json() for r in live.rx.received("/slack/platform-hook") if c.id in json.dumps(r.json())]
    assert any("*How to confirm*" in json.dumps(b) for b in alert["blocks"])  # before: how to decide
    body = slack_click(c.id, "new", response=live.rx.url("/slack/response/decided"), blocks=alert["blocks"])
    assert live.post("/chat/slack/interactions", body, signed(body))[0] == 200
    (update,) = live.wait_for("/slack/response/decided")
    shown = json.dumps(update.json()["blocks"], ensure_ascii=False)
    # The beliefs stay; how to decide, the commands and who may decide are gone once decided.
    assert "Standups are async." in shown and "OLD belief" in shown
    for stale in ("How to confirm", "taskzilla-sleep contradictions resolve", "/resolve", "may decide"):
        assert stale not in shown, stale
    last = update.json()["blocks"][-1]["text"]["text"]
    assert last == (
        ":white_check_mark: resolved by slack:U042 (alice): kept new\n"
        "The bot now uses: \u201cStandup is a call.\u201d (active).\n"
        "No longer used: \u201cStandups are async.\u201d (superseded)."
    )

    before = len(live.rx.requests)
    live.deliver()
    posted = {r.path.split("/")[1]: r.json() for r in live.rx.requests[before:] if c.id in r.body.decode()}
    slack_text = json.dumps(posted["slack"]["blocks"], ensure_ascii=False)
    assert slack_text.count("resolved by slack:U042 (alice): kept new") == 1  # said once (the title)
    assert "The bot now uses: \u201cStandup is a call.\u201d (active)." in slack_text
    assert posted["tg"]["text"].count("kept new") == 1
    assert "The bot now uses: \u201cStandup is a call.\u201d (active)." in posted["tg"]["text"]
    hook = posted["hook"]
    assert (hook["new"]["status"], hook["old"]["status"]) == ("active", "superseded")
    assert "No longer used: \u201cStandups are async.\u201d (superseded)." in hook["text"]


def test_keep_both_keeps_both_in_use_by_their_evidence_and_says_so(live: Live) -> None:
    c = live.contradiction("keepboth")  # the old belief's confidence fell to 0.5 when it was contested
    live.deliver()
    body = json.dumps({"keep": "both", "note": "async in EU, call in US"}).encode()
    assert live.post(f"/v1/contradictions/{c.id}/resolve", body, {"Content-Type": "application/json"})[0] == 200
    graph = live.worker.services.graph
    status = {p.id: p.status.value for p in graph.patterns_by_id([c.old_pattern_id, c.new_pattern_id])}
    assert status == {c.old_pattern_id: "tentative", c.new_pattern_id: "active"}  # 0.5 and 0.9 against 0.8
    before = len(live.rx.requests)
    live.deliver()
    posted = {r.path.split("/")[1]: r.json() for r in live.rx.requests[before:] if c.id in r.body.decode()}
    says = (
        "The bot now uses both: \u201cStandups are async.\u201d (tentative) and "
        "\u201cStandup is a call.\u201d (active)."
    )
    assert says in posted["tg"]["text"] and says in posted["hook"]["text"]
    assert "ranked below active ones" in posted["hook"]["text"]
    assert "No longer used" not in posted["hook"]["text"]
