"""What a click in chat does: who clicked, from which configured channel, which decision, and the
answer to the chat. The HTTP layer (``routes.py``) only reads requests and schedules the answers.

A click counts only from a channel configured for it (Slack: the signing secret matched and the
Slack channel id is the channel's ``channel_id``; Telegram: the webhook secret matched and the chat
is the channel's ``chat_id``), and only for a contradiction of a team that channel is routed to
(``teams``): a click in team A's channel cannot resolve team B's contradiction. When the channel
names ``deciders`` (Slack or Telegram user ids), only they may decide: anyone else's click is
answered "not allowed" (ephemeral in Slack, the button's answer in Telegram), changes nothing, and
is put on the audit trail as ``resolve_refused``. The clicker is recorded as ``by``
(``slack:U123 (alice)``, ``telegram:42 (@bob)``). The resolution itself is the service's, the one
path every caller takes, so the alert's answer in chat is queued there too.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from taskzilla_sleep.alerts.actions import SLACK_DECIDERS_BLOCK, SLACK_HOW_BLOCK, Click, parse_telegram_callback
from taskzilla_sleep.alerts.message import HOW_HEADINGS, Section, resolution_line, what_recall_uses
from taskzilla_sleep.alerts.outbox import Alert, Outbox
from taskzilla_sleep.alerts.render import telegram_payload
from taskzilla_sleep.alerts.senders import TelegramSender, build_sender, env_secret
from taskzilla_sleep.core.errors import BadRequest, Conflict, DeliveryError, Forbidden, TaskzillaError, Unauthorized
from taskzilla_sleep.core.models import Contradiction
from taskzilla_sleep.core.settings import AlertChannel
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.interfaces.chatops.slack import Interaction, SignatureCheck, parse_interaction
from taskzilla_sleep.rules.access import Access
from taskzilla_sleep.service.memory_service import MemoryService, audit

log = structlog.get_logger(__name__)

CALLBACK_TEXT_MAX = 200  # answerCallbackQuery text
BY_MAX = 120


class NotADecider(Forbidden):
    """The clicker is in the channel but not among its ``deciders``: told so, nothing changes."""


@dataclass(frozen=True)
class SlackChannel:
    name: str
    config: AlertChannel
    secret: bytes  # the app's signing secret (never logged)

    def __repr__(self) -> str:
        return f"SlackChannel(name={self.name!r})"


@dataclass(frozen=True)
class TelegramChannel:
    name: str
    config: AlertChannel
    secret: str  # setWebhook's secret_token (never logged)
    bot: TelegramSender  # calls the Bot API with the channel's token

    def __repr__(self) -> str:
        return f"TelegramChannel(name={self.name!r})"


@dataclass(frozen=True)
class Callback:
    """A Telegram button press, and what to tell the person (``text``) once it is handled."""

    bot: TelegramSender | None
    query_id: str
    chat_id: str
    message_id: int | None
    text: str
    resolved: bool
    # What was decided, and the channels of this chat: the alert is rewritten from them once answered
    done: Contradiction | None = None
    channels: frozenset[str] = frozenset()


class ChatOps:
    """The configured chat channels people resolve from, and one HTTP client for Slack's response_url."""

    def __init__(
        self,
        service: MemoryService,
        slack: Sequence[SlackChannel],
        telegram: Sequence[TelegramChannel],
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.service = service
        self.slack = list(slack)
        self.telegram = list(telegram)
        self.check = SignatureCheck(service.graph)  # the replay memory is shared by every replica
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False, transport=transport)

    @classmethod
    def from_settings(cls, service: MemoryService, env: Mapping[str, str]) -> ChatOps | None:
        """None when no channel is set up for resolving; ConfigError naming a missing secret."""
        alerts = service.settings.alerts
        slack: list[SlackChannel] = []
        telegram: list[TelegramChannel] = []
        for name, ch in sorted(alerts.channels.items()):
            if not ch.enabled:
                continue
            if ch.kind == "slack" and ch.signing_secret_env:
                what = "the Slack app's signing secret"
                secret = env_secret(env, name, ch, ch.signing_secret_env, "signing_secret_env", what)
                slack.append(SlackChannel(name, ch, secret.encode("utf-8")))
            elif ch.kind == "telegram" and ch.webhook_secret_env:
                what = "the secret_token given to setWebhook"
                token = env_secret(env, name, ch, ch.webhook_secret_env, "webhook_secret_env", what)
                bot = build_sender(name, ch, alerts.timeout_s, env)
                assert isinstance(bot, TelegramSender)
                telegram.append(TelegramChannel(name, ch, token, bot))
        if not slack and not telegram:
            return None
        return cls(service, slack, telegram, alerts.timeout_s)

    def close(self) -> None:
        self._http.close()
        for t in self.telegram:
            t.bot.close()

    # -- deciding -----------------------------------------------------------------------------
    def _resolve(
        self, by: str, user: str, channels: Sequence[AlertChannel], cid: str, click: Click, where: str
    ) -> Contradiction:
        c = self.service.graph.get_contradiction(cid)  # NotFound when there is none
        routed = [ch for ch in channels if ch.routes(c.team)]
        if not routed:
            raise Forbidden(f"{where} is not routed to team {c.team!r}: a click there cannot resolve {cid}")
        every = any("*" in ch.teams for ch in channels)
        teams = None if every else frozenset(t for ch in channels for t in ch.teams)
        access = Access(name=one_line(by, BY_MAX), teams=teams, role="write")
        if not any(not ch.deciders or user in ch.deciders for ch in routed):
            deciders = sorted({d for ch in routed for d in ch.deciders})
            audit(access, "resolve_refused", c.team, [cid], keep=click.keep, where=where, why="not a decider")
            log.info("chat_click_refused", where=where, contradiction_id=cid, error="not a decider")
            names = ", ".join(f"<@{d}>" if routed[0].kind == "slack" else d for d in deciders)
            raise NotADecider(f"only {names} may decide on {cid} from here; nothing was changed")
        done = self.service.resolve(access, cid, click.keep, None)
        log.info("chat_resolved", contradiction_id=cid, keep=click.keep, by=access.name, where=where)
        return done

    def slack_click(
        self, body: bytes, timestamp: str | None, sig: str | None
    ) -> tuple[Interaction, Contradiction | None, str | None]:
        """A signed Slack interaction: verified, then the click applied. Returns the interaction,
        the resolution (None for the console link) and, when the contradiction was already decided
        another way, what to tell the clicker (nothing changes)."""
        if not self.slack:
            raise Unauthorized("no Slack channel is set up for resolving (alerts.channels.*.signing_secret_env)")
        matched = [self.slack[i] for i in self.check.verify([s.secret for s in self.slack], timestamp, sig, body)]
        act = parse_interaction(body)
        if act.click is None:
            return act, None, None
        here = [s.config for s in matched if s.config.channel_id == act.channel_id]
        if not here:
            raise Forbidden(f"Slack channel {act.channel_id} is not a configured alert channel (channel_id)")
        try:
            done = self._resolve(act.by, act.user_id, here, act.click.ref, act.click, f"Slack channel {act.channel_id}")
        except Conflict as exc:
            return act, None, f"Not changed: {exc}"
        except NotADecider as exc:
            return act, None, f"Not allowed: {exc}"
        return act, done, None

    def telegram_channels(self, secret: str | None) -> list[TelegramChannel]:
        if not secret:
            raise Unauthorized("missing X-Telegram-Bot-Api-Secret-Token")
        found = [t for t in self.telegram if hmac.compare_digest(t.secret.encode(), secret.encode())]
        if not found:
            raise Unauthorized("the X-Telegram-Bot-Api-Secret-Token matches no configured channel")
        return found

    def telegram_click(self, channels: Sequence[TelegramChannel], update: Any) -> Callback | None:
        """A callback_query from an inline button: applied, or refused with the reason as its answer.
        None for any other update (messages to the bot are not ours to handle)."""
        cq = _obj(update, "callback_query")
        if not cq:
            return None
        message = _obj(cq, "message")
        chat_id = str(_obj(message, "chat").get("id", ""))
        message_id = message.get("message_id") if isinstance(message.get("message_id"), int) else None
        here = [t for t in channels if t.config.chat_id == chat_id]
        bot = here[0].bot if here else (channels[0].bot if channels else None)
        user = _obj(cq, "from")
        name = f"@{user['username']}" if user.get("username") else str(user.get("first_name") or "")
        by = f"telegram:{user.get('id', '?')}" + (f" ({name})" if name else "")
        query_id = str(cq.get("id") or "")
        try:
            if not here:
                raise Forbidden(f"Telegram chat {chat_id} is not a configured alert channel (chat_id)")
            click = parse_telegram_callback(str(cq.get("data") or ""))
            cid = click.ref
            if click.is_digest:
                outbox = Outbox(self.service.graph)
                cid = next((i for t in here if (i := outbox.alerted_contradiction(t.name, click.ref))), "")
                if not cid:
                    raise BadRequest("this button's contradiction is not one this chat was alerted about")
            user_id = str(user.get("id", ""))
            done = self._resolve(by, user_id, [t.config for t in here], cid, click, f"Telegram chat {chat_id}")
        except NotADecider as exc:
            return Callback(bot, query_id, chat_id, message_id, f"Not allowed: {exc}", resolved=False)
        except TaskzillaError as exc:  # refused, unknown, decided otherwise already, a store error
            log.info("chat_click_refused", where=f"Telegram chat {chat_id}", error=str(exc)[:200])
            return Callback(bot, query_id, chat_id, message_id, f"Not resolved: {exc}", resolved=False)
        names = frozenset(t.name for t in here)
        return Callback(bot, query_id, chat_id, message_id, resolution_line(done), True, done, names)

    def _decided(self, cb: Callback) -> dict[str, Any] | None:
        """editMessageText's text and parse mode: the clicked alert as it reads once decided, as Slack's is
        updated (how to decide and who may are gone; who decided, and what the bot now uses, below it).
        None: the keyboard is only removed (a digest's message, or an alert this worker has no record of)."""
        done = cb.done
        if done is None or cb.message_id is None:
            return None
        ref = str(cb.message_id)
        record = next(
            (
                a
                for a in self.service.graph.alerts()
                if a.kind == "contradiction"
                and a.contradiction_id == done.id
                and a.channel in cb.channels
                and a.message_ref == ref
            ),
            None,
        )
        if record is None:
            return None
        try:
            msg = Alert.of(record).message
        except ValueError:  # a payload this version cannot read: the keyboard goes, the text stays
            return None
        beliefs = self.service.graph.patterns_by_id([done.old_pattern_id, done.new_pattern_id])
        note = Section(heading="Decided", body=f"{resolution_line(done)}\n{what_recall_uses(done, beliefs)}")
        kept = [x for x in msg.sections if not x.how and f"*{x.heading}*" not in HOW_HEADINGS]
        body = telegram_payload(msg.model_copy(update={"sections": (*kept, note)}), cb.chat_id)
        return {"text": body["text"], **({"parse_mode": body["parse_mode"]} if "parse_mode" in body else {})}

    # -- answering (after the HTTP answer: failures are logged, the outbox answer still comes) --
    def answer_slack(self, act: Interaction, done: Contradiction | None, refused: str | None = None) -> None:
        if refused is not None:
            body: dict[str, Any] = {"response_type": "ephemeral", "replace_original": False, "text": refused}
        elif done is not None:
            line = resolution_line(done)
            kept = [b for b in act.blocks if not _until_decided(b)]
            uses = what_recall_uses(done, self.service.graph.patterns_by_id([done.old_pattern_id, done.new_pattern_id]))
            text = f":white_check_mark: {_esc(line)}\n{_esc(uses)}"
            note = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
            body = {"replace_original": True, "text": f"Contradiction {done.id} {line}", "blocks": [*kept, note]}
        else:
            return
        try:
            resp = self._http.post(act.response_url, json=body)
            ok = 200 <= resp.status_code < 300
        except httpx.HTTPError as exc:
            ok = False
            log.warning("slack_response_failed", error=type(exc).__name__)
        if not ok:
            log.warning("slack_response_refused", contradiction_id=done.id if done else None)

    def answer_telegram(self, cb: Callback) -> None:
        if cb.bot is None:
            return
        calls: list[tuple[str, dict[str, Any]]] = []
        if cb.query_id:
            text = one_line(cb.text, CALLBACK_TEXT_MAX)
            calls.append(
                ("answerCallbackQuery", {"callback_query_id": cb.query_id, "text": text, "show_alert": not cb.resolved})
            )
        if cb.resolved and cb.message_id is not None:
            markup = {"chat_id": cb.chat_id, "message_id": cb.message_id, "reply_markup": {"inline_keyboard": []}}
            decided = self._decided(cb)  # read here, after the webhook's answer, as Slack's update is
            if decided is not None:  # the text and its keyboard in one edit
                quiet = {"link_preview_options": {"is_disabled": True}}
                calls.append(("editMessageText", {**markup, **decided, **quiet}))
            else:
                calls.append(("editMessageReplyMarkup", markup))
        for method, body in calls:
            try:
                cb.bot.call(method, body)
            except DeliveryError as exc:
                log.warning("telegram_call_failed", method=method, error=str(exc))


def _obj(d: Any, key: str) -> dict[str, Any]:
    """``d[key]`` when both are JSON objects, else an empty one (a Telegram Update is read defensively)."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _until_decided(block: Any) -> bool:
    """A block of the alert that is stale once a person decided: the buttons, who may decide, and how
    to decide (found by block id; by heading in an alert posted before the blocks had ids)."""
    if not isinstance(block, dict):
        return False
    bid = str(block.get("block_id") or "")
    text = _obj(block, "text").get("text")
    return (
        block.get("type") == "actions"
        or bid in (SLACK_DECIDERS_BLOCK, SLACK_HOW_BLOCK)
        or bid.startswith(SLACK_HOW_BLOCK + "_")
        or (isinstance(text, str) and text.startswith(HOW_HEADINGS))
    )


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
