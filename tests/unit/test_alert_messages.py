"""Alert messages and their per-channel renderings (pure: no network, no store)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from taskzilla_sleep.alerts.delivery import RetryDecision, RetryStrategy, backoff_delay
from taskzilla_sleep.alerts.message import EXAMPLE_CHARS, AlertMessage, Section, format_contradiction, format_summary
from taskzilla_sleep.alerts.render import (
    TELEGRAM_MAX_CHARS,
    slack_payload,
    telegram_payload,
    utf16_len,
    webhook_payload,
)
from taskzilla_sleep.alerts.senders import SlackSender, TelegramSender, WebhookSender, build_senders
from taskzilla_sleep.core.errors import ConfigError, DeliveryError
from taskzilla_sleep.core.models import (
    Contradiction,
    ContradictionKind,
    Episode,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
)
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings

T = datetime(2026, 11, 28, 2, 15, tzinfo=UTC)  # 03:15 in Amsterdam
CID = "con_0123456789abcdef"
CLI = f"taskzilla-sleep contradictions resolve {CID} --keep new|old|both --by NAME [--note TEXT]"
HTTP = f'POST /v1/contradictions/{CID}/resolve {{"keep": "new|old|both", "note": "..."}}'
SLACK_SECRET = "XyZsecretSlackPart0123456789"
TG_TOKEN = "123456:AAH-tg-secret-token-value"


def pattern(pid: str, statement: str, support: int, counter: int, confidence: float, days: int) -> Pattern:
    return Pattern(
        id=pid,
        team="platform",
        statement=statement,
        kind=PatternKind.NORM,
        status=PatternStatus.CONTESTED,
        confidence=confidence,
        support_count=support,
        counter_count=counter,
        first_seen=T - timedelta(days=days),
        last_seen=T - timedelta(days=1),
        created_at=T - timedelta(days=days),
        updated_at=T,
        valid_from=T - timedelta(days=days),
    )


def episode(eid: str, author: str, text: str, day: int) -> Episode:
    return Episode(
        id=eid,
        team="platform",
        channel="standup",
        author=author,
        text=text,
        ts=datetime(2026, 11, day, 9, 30, tzinfo=UTC),
        provenance=Provenance.HUMAN,
        ingested_at=T,
    )


OLD = pattern("pat_old", "Standups are async in #standup threads.", 5, 2, 0.714, 30)
NEW = pattern("pat_new", "Standups are a 10:00 voice call.", 3, 0, 0.82, 4)
OLD_EX = [
    episode("e1", "sara", "Reminder: standups are async, post in the thread " + "blah " * 60, 2),
    episode("e2", "tom", "async standup update:\n  - deploys green", 5),
    episode("e3", "ann", "a third one that must not be shown", 6),
]
NEW_EX = [episode("e4", "martin", "From Monday standup is a 10:00 voice call", 24), episode("e5", "lea", "joining", 25)]
CON = Contradiction(
    id=CID,
    team="platform",
    old_pattern_id="pat_old",
    new_pattern_id="pat_new",
    opened_at=T,
    reason="One says async in threads, the other a live call.",
)


@pytest.fixture
def msg() -> AlertMessage:
    return format_contradiction(CON, OLD, NEW, OLD_EX, NEW_EX, tz=ZoneInfo("Europe/Amsterdam"))


def test_contradiction_names_both_beliefs_their_evidence_the_id_and_how_to_resolve(msg: AlertMessage) -> None:
    text = msg.text
    assert msg.title and msg.title in text
    assert "OLD belief pat_old (contested)" in text and "“Standups are async in #standup threads.”" in text
    assert "NEW belief pat_new (contested)" in text and "“Standups are a 10:00 voice call.”" in text
    assert "Evidence: 5 episodes, 2 against · confidence 0.71 · first seen 2026-10-29 · last seen 2026-11-27" in text
    assert "Evidence: 3 episodes · confidence 0.82 · first seen 2026-11-24 · last seen 2026-11-27" in text
    assert f"Contradiction {CID} in team platform, opened 2026-11-28 03:15 CET" in text
    assert "Why they conflict: One says async in threads, the other a live call." in text
    assert CLI in text and HTTP in text
    for keep in ("new", "old", "both"):
        assert f"--keep {keep}:" in text

    # Structured fields, for the webhook and for people's tooling.
    assert msg.kind == "contradiction" and msg.id == CID and msg.team == "platform"
    assert msg.old is not None and msg.new is not None and msg.resolve is not None
    assert (msg.old.id, msg.old.evidence, msg.old.against, msg.old.confidence) == ("pat_old", 5, 2, 0.714)
    assert (msg.new.id, msg.new.evidence, msg.new.against) == ("pat_new", 3, 0)
    assert msg.resolve.cli == CLI
    assert msg.resolve.http.method == "POST" and msg.resolve.http.path == f"/v1/contradictions/{CID}/resolve"
    assert msg.resolve.http.body == {"keep": "new|old|both", "note": "..."}


def test_a_disagreement_says_people_disagree(msg: AlertMessage) -> None:
    assert msg.contradiction_kind == "disagreement"
    assert msg.title == "Contradiction in platform: people disagree"
    assert "People disagree" in msg.text and "confirm" not in msg.text.casefold()


def test_an_update_reads_as_a_change_to_confirm_with_one_command() -> None:
    update = CON.model_copy(update={"kind": ContradictionKind.UPDATE})
    new = NEW.model_copy(update={"status": PatternStatus.ACTIVE})
    msg = format_contradiction(update, OLD, new, OLD_EX, NEW_EX, tz=ZoneInfo("Europe/Amsterdam"))
    text = msg.text
    assert msg.contradiction_kind == "update"
    assert msg.title.startswith("Change in platform to confirm: Standups are a 10:00 voice call.")
    assert (
        "The team seems to have changed a practice on 2026-11-24: from “Standups are async in #standup "
        "threads.” to “Standups are a 10:00 voice call.”. Confirm with lea, martin." in text
    )
    confirm = f"taskzilla-sleep contradictions resolve {CID} --keep new --by NAME"
    assert confirm in text and CLI in text  # the one command, and the other choices
    assert "NEW belief pat_new (active)" in text and "nothing is superseded" in text
    assert "Why it looks like a change: One says async" in text


def test_two_examples_per_belief_with_author_date_and_trimmed_text(msg: AlertMessage) -> None:
    assert msg.old is not None and msg.new is not None
    assert [e.author for e in msg.old.examples] == ["sara", "tom"]  # at most two, in the order given
    assert [e.author for e in msg.new.examples] == ["martin", "lea"]
    long = msg.old.examples[0].text
    assert (
        EXAMPLE_CHARS - 5 <= len(long) <= EXAMPLE_CHARS
        and long.endswith("…")
        and long.startswith("Reminder: standups are async")
    )
    assert msg.old.examples[1].text == "async standup update: - deploys green"  # one line
    text = msg.text
    assert "- sara, 2026-11-02 10:30 CET in standup: “Reminder: standups are async" in text
    assert "- martin, 2026-11-24 10:30 CET in standup: “From Monday standup is a 10:00 voice call”" in text
    assert "third one" not in text


def test_the_message_survives_its_json_round_trip(msg: AlertMessage) -> None:
    # The outbox stores exactly this JSON and every retry renders from it.
    again = AlertMessage.model_validate_json(msg.model_dump_json())
    assert again == msg and again.text == msg.text


def test_summary_message() -> None:
    s = format_summary("  3 patterns learned, 1 contradiction opened.\n", key="summary_2026-11-28")
    assert (s.kind, s.id, s.old, s.resolve) == ("summary", "summary_2026-11-28", None, None)
    assert s.text == "Nightly memory summary\n\n3 patterns learned, 1 contradiction opened."


# -- Telegram --------------------------------------------------------------------------------------


def test_telegram_payload_is_escaped_html_with_the_commands(msg: AlertMessage) -> None:
    nasty = pattern("pat_old", "Use <b>bold</b> & <script>x</script> > never", 5, 2, 0.7, 30)
    m = format_contradiction(CON, nasty, NEW, [], [])
    body = telegram_payload(m, "-1001234")
    assert body["chat_id"] == "-1001234" and body["parse_mode"] == "HTML"
    assert body["link_preview_options"] == {"is_disabled": True}
    text = body["text"]
    assert "Use &lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt; &gt; never" in text
    assert "<script>" not in text and "<b>bold" not in text
    assert text.startswith(f"<b>{m.title}</b>")
    assert f"<code>{CLI}</code>" in text
    assert f"<code>{HTTP}</code>" in text  # quotes need no escaping in Telegram HTML
    # Only the tags we put there: b and code.
    tags = {t.split(">")[0].strip("/") for t in text.split("<")[1:]}
    assert tags <= {"b", "code"}


def test_telegram_fits_4096_and_keeps_identity_and_resolve_instructions(msg: AlertMessage) -> None:
    huge = tuple(s.model_copy(update={"body": s.body + " 😀&<" * 3000}) if not s.essential else s for s in msg.sections)
    body = telegram_payload(msg.model_copy(update={"sections": huge}), "42")
    text = body["text"]
    assert body["parse_mode"] == "HTML"
    assert utf16_len(text) <= TELEGRAM_MAX_CHARS
    assert f"<code>{CLI}</code>" in text and CID in text and "OLD belief pat_old" in text and "NEW belief" in text
    assert "…" in text
    assert "&am…" not in text and "&l…" not in text  # never cut inside an escape


def test_telegram_long_summary_is_clipped_to_the_limit() -> None:
    body = telegram_payload(format_summary("line of the night 🌙 & more\n" * 2000), "42")
    assert utf16_len(body["text"]) <= TELEGRAM_MAX_CHARS and body["text"].endswith("…")
    assert body["text"].startswith("<b>Nightly memory summary</b>")


def test_telegram_falls_back_to_plain_text_when_even_the_essentials_are_too_long() -> None:
    m = AlertMessage(kind="summary", id="s", title="t", sections=(Section(body="<x>" * 3000, essential=True),))
    body = telegram_payload(m, "42")
    assert "parse_mode" not in body  # plain text: no markup to break when clipping
    assert utf16_len(body["text"]) <= TELEGRAM_MAX_CHARS and body["text"].startswith("t\n\n<x><x>")


# -- Slack -------------------------------------------------------------------------------------


def test_slack_payload_shape(msg: AlertMessage) -> None:
    body = slack_payload(msg)
    assert set(body) == {"text", "blocks"}
    assert body["text"] == f"{msg.title} ({CID})"
    header, *sections = body["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": msg.title, "emoji": False}}
    assert [b["type"] for b in sections] == ["section"] * 4
    assert all(b["text"]["type"] == "mrkdwn" and len(b["text"]["text"]) <= 3000 for b in sections)
    intro, old, new, resolve = (b["text"]["text"] for b in sections)
    assert CID in intro
    assert old.startswith("*OLD belief pat_old (contested)*\n") and "Evidence: 5 episodes, 2 against" in old
    assert new.startswith("*NEW belief pat_new (contested)*\n") and "Evidence: 3 episodes" in new
    assert old.count("\n- ") == 2 and new.count("\n- ") == 2
    assert resolve.startswith("*How to resolve*\n")
    assert f"```{CLI}\n{HTTP}```" in resolve
    json.dumps(body)  # serialisable as is


def test_slack_escapes_control_characters_so_chat_text_cannot_ping_everyone() -> None:
    sneaky = [episode("e9", "eve", "<!channel> look at <https://evil|this> & that", 3)]
    body = slack_payload(format_contradiction(CON, OLD, NEW, sneaky, []))
    texts = json.dumps(body)
    assert "<!channel>" not in texts and "<https://evil" not in texts
    assert "&lt;!channel&gt; look at &lt;https://evil|this&gt; &amp; that" in body["blocks"][2]["text"]["text"]


def test_slack_long_summary_is_split_into_blocks_within_limits() -> None:
    body = slack_payload(format_summary("a line of the nightly summary\n" * 400))
    sections = body["blocks"][1:]
    assert len(sections) >= 4 and len(body["blocks"]) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in sections)
    joined = "\n".join(b["text"]["text"] for b in sections)
    assert joined.count("a line of the nightly summary") == 400


# -- generic webhook -------------------------------------------------------------------------------


def test_webhook_payload_shape(msg: AlertMessage) -> None:
    body = webhook_payload(msg, f"{CID}:pager")
    assert set(body) == {
        "type",
        "id",
        "team",
        "title",
        "text",
        "idempotency_key",
        "reason",
        "opened_at",
        "old",
        "new",
        "resolve",
    }
    assert (body["type"], body["id"], body["team"], body["idempotency_key"]) == (
        "contradiction",
        CID,
        "platform",
        f"{CID}:pager",
    )
    assert body["opened_at"] == "2026-11-28T02:15:00Z"
    assert body["old"]["statement"] == OLD.statement and body["old"]["evidence"] == 5
    assert body["old"]["first_seen"] == "2026-10-29T02:15:00Z"
    assert [e["author"] for e in body["new"]["examples"]] == ["martin", "lea"]
    assert body["resolve"]["cli"] == CLI
    assert body["resolve"]["http"] == {
        "method": "POST",
        "path": f"/v1/contradictions/{CID}/resolve",
        "body": {"keep": "new|old|both", "note": "..."},
    }
    assert json.loads(json.dumps(body)) == body

    summary = webhook_payload(format_summary("hello"), "summary_x:pager")
    assert summary["type"] == "summary" and summary["text"].endswith("hello") and "old" not in summary


# -- senders: configuration and secrets ------------------------------------------------------------


def settings(**channels: AlertChannel) -> AlertSettings:
    return AlertSettings(channels=channels, timeout_s=2)


def test_build_senders_reads_urls_and_tokens_from_the_named_env_vars() -> None:
    s = settings(
        team=AlertChannel(kind="slack", url_env="SLACK_URL"),
        ops=AlertChannel(kind="telegram", token_env="TG_TOKEN", chat_id="-100"),
        pager=AlertChannel(kind="webhook", url_env="HOOK_URL"),
        off=AlertChannel(kind="webhook", url_env="NOT_SET", enabled=False),
    )
    env = {
        "SLACK_URL": f"https://hooks.slack.com/services/T000/B000/{SLACK_SECRET}",
        "TG_TOKEN": TG_TOKEN,
        "HOOK_URL": "https://pager.example/hook?sig=abcdef123456",
    }
    senders = build_senders(s, env)
    try:
        assert sorted(senders) == ["ops", "pager", "team"]  # the disabled channel needs no env var
        assert isinstance(senders["team"], SlackSender) and isinstance(senders["pager"], WebhookSender)
        tg = senders["ops"]
        assert isinstance(tg, TelegramSender) and tg.chat_id == "-100"
        for sender in senders.values():
            r = repr(sender)
            assert SLACK_SECRET not in r and TG_TOKEN not in r and "sig=" not in r and "/services/" not in r
        assert repr(senders["team"]) == "SlackSender(channel='team', host='hooks.slack.com')"
        assert repr(tg) == "TelegramSender(channel='ops', host='api.telegram.org')"
        leak = f"POST https://api.telegram.org/bot{TG_TOKEN}/sendMessage failed; token {TG_TOKEN}"
        assert TG_TOKEN not in tg.mask(leak) and "AAH-tg-secret" not in tg.mask(leak)
        slack_leak = f"error for https://hooks.slack.com/services/T000/B000/{SLACK_SECRET} ({SLACK_SECRET})"
        assert SLACK_SECRET not in senders["team"].mask(slack_leak)
    finally:
        for sender in senders.values():
            sender.close()


@pytest.mark.parametrize(
    ("channel", "message"),
    [
        (
            AlertChannel(kind="slack", url_env="TASKZILLA_SLACK_WEBHOOK_URL"),
            "alerts.channels.team (slack): environment variable TASKZILLA_SLACK_WEBHOOK_URL is not set",
        ),
        (
            AlertChannel(kind="telegram", token_env="TASKZILLA_TELEGRAM_BOT_TOKEN", chat_id="1"),
            "alerts.channels.team (telegram): environment variable TASKZILLA_TELEGRAM_BOT_TOKEN is not set",
        ),
        (AlertChannel(kind="webhook"), "alerts.channels.team (webhook): set url_env"),
        (AlertChannel(kind="telegram", token_env="TOK"), "alerts.channels.team (telegram): chat_id is required"),
    ],
)
def test_a_missing_secret_is_a_config_error_naming_channel_and_variable(channel: AlertChannel, message: str) -> None:
    with pytest.raises(ConfigError, match="config error") as err:
        build_senders(settings(team=channel), {"TOK": "1:x"})
    assert message in str(err.value)


def test_a_bad_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as err:
        build_senders(settings(team=AlertChannel(kind="slack", url_env="U")), {"U": f"hooks.slack.com/{SLACK_SECRET}"})
    assert "U does not hold an http(s) URL" in str(err.value) and SLACK_SECRET not in str(err.value)


@pytest.mark.parametrize(
    ("status", "reply", "error", "retry_after", "config_problem"),
    [
        (
            429,
            {"ok": False, "description": "Too Many Requests: retry after 7", "parameters": {"retry_after": 7}},
            "HTTP 429: Too Many Requests: retry after 7",
            7.0,
            False,
        ),
        (
            400,
            {"ok": False, "description": "Bad Request: chat not found"},
            "HTTP 400: Bad Request: chat not found",
            None,
            True,
        ),
        (401, {"ok": False, "description": f"Unauthorized bot{TG_TOKEN}"}, "HTTP 401: Unauthorized bot***", None, True),
        (502, "<html>bad gateway</html>", "HTTP 502: <html>bad gateway</html>", None, False),
        (301, "", "HTTP 301", None, True),  # redirects are not followed: the URL is wrong
    ],
)
def test_telegram_answers_become_secret_free_delivery_errors(
    status: int, reply: object, error: str, retry_after: float | None, config_problem: bool
) -> None:
    # httpx's MockTransport stands in for api.telegram.org here; the contract tests use a real server.
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == f"/bot{TG_TOKEN}/sendMessage"
        assert request.headers["Idempotency-Key"] == "k1"
        if isinstance(reply, dict):
            return httpx.Response(status, json=reply)
        return httpx.Response(status, text=str(reply))

    s = settings(ops=AlertChannel(kind="telegram", token_env="T", chat_id="-1"))
    (sender,) = build_senders(s, {"T": TG_TOKEN}, transport=httpx.MockTransport(answer)).values()
    try:
        with pytest.raises(DeliveryError) as err:
            sender.send(format_summary("hi"), "k1")
    finally:
        sender.close()
    assert str(err.value) == error
    assert (err.value.status, err.value.retry_after_s, err.value.config_problem) == (
        status,
        retry_after,
        config_problem,
    )
    assert err.value.__cause__ is None  # no chained httpx exception: it would carry the URL


# -- backoff ---------------------------------------------------------------------------------------


def test_backoff_is_exponential_capped_and_jittered() -> None:
    rng = random.Random(7)
    for failures, ceiling in [(1, 30), (2, 60), (3, 120), (4, 240), (8, 3600), (400, 3600)]:
        delays = [backoff_delay(failures, 30, 3600, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (failures, min(delays), max(delays))
        assert len({round(d, 6) for d in delays}) > 100  # jittered, not lockstep


# -- the retry decision (plain data: no HTTP, no store) --------------------------------------------

STRATEGY = RetryStrategy(max_attempts=5, base_s=30, max_s=3600)


def test_retry_strategy_comes_from_the_alert_settings() -> None:
    s = AlertSettings(max_attempts=7, backoff_base_s=10, backoff_max_s=900)
    assert RetryStrategy.from_settings(s) == RetryStrategy(max_attempts=7, base_s=10, max_s=900)


def test_a_transient_failure_is_retried_with_backoff_and_holds_the_channel_back() -> None:
    d = STRATEGY.decide(0, DeliveryError("timed out after 2s"), T, random.Random(1))
    # Exactly the backoff_delay schedule, drawing the same random number.
    delay = backoff_delay(1, 30, 3600, random.Random(1))
    assert d == RetryDecision(
        attempts=1, give_up=False, retry_at=T + timedelta(seconds=delay), defer_channel=True, config_problem=False
    )
    assert T + timedelta(seconds=15) <= d.retry_at <= T + timedelta(seconds=30)
    # Any other exception (a bug in a renderer, say) is treated the same way.
    other = STRATEGY.decide(2, RuntimeError("boom"), T, random.Random(1))
    assert (other.attempts, other.give_up, other.defer_channel, other.config_problem) == (3, False, True, False)
    assert other.retry_at == T + timedelta(seconds=backoff_delay(3, 30, 3600, random.Random(1)))


def test_the_decision_is_pure_and_draws_from_rng_once() -> None:
    err = DeliveryError("HTTP 503", status=503)
    rng, twin = random.Random(5), random.Random(5)
    assert STRATEGY.decide(1, err, T, rng) == STRATEGY.decide(1, err, T, twin)
    twin.uniform(0, 1)
    rng.uniform(0, 1)
    assert rng.random() == twin.random()
    with pytest.raises(AttributeError):
        STRATEGY.decide(1, err, T, rng).give_up = True  # type: ignore[misc]


def test_max_attempts_gives_up_and_still_holds_the_channel_back_when_transient() -> None:
    assert not STRATEGY.decide(3, DeliveryError("HTTP 502", status=502), T).give_up
    d = STRATEGY.decide(4, DeliveryError("HTTP 502", status=502), T)
    assert (d.attempts, d.give_up, d.defer_channel) == (5, True, True)
    assert STRATEGY.decide(40, DeliveryError("HTTP 502"), T).give_up  # past the budget (e.g. lowered in config)


def test_a_config_problem_is_retried_loudly_without_holding_the_channel_back() -> None:
    err = DeliveryError("HTTP 404: no_service", status=404, config_problem=True)
    d = STRATEGY.decide(0, err, T, random.Random(2))
    assert (d.give_up, d.defer_channel, d.config_problem) == (False, False, True)
    assert d.retry_at == T + timedelta(seconds=backoff_delay(1, 30, 3600, random.Random(2)))
    last = STRATEGY.decide(4, err, T)
    assert (last.give_up, last.defer_channel, last.config_problem) == (True, False, True)


@pytest.mark.parametrize(
    ("retry_after_s", "low", "high"),
    [
        (600.0, 600, 600),  # the receiver's wait, longer than our backoff
        (86_400.0, 3600, 3600),  # honoured only up to max_s
        (1.0, 15, 30),  # shorter than our backoff: ours stands
        (None, 15, 30),
    ],
)
def test_retry_after_is_honoured_up_to_max_s(retry_after_s: float | None, low: float, high: float) -> None:
    err = DeliveryError("HTTP 429", status=429, retry_after_s=retry_after_s)
    d = STRATEGY.decide(0, err, T, random.Random(3))
    assert T + timedelta(seconds=low) <= d.retry_at <= T + timedelta(seconds=high)
    assert (d.give_up, d.defer_channel, d.config_problem) == (False, True, False)
