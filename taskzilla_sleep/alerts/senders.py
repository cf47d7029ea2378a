"""HTTP senders: one per configured channel, each posting a rendered AlertMessage.

Secrets (Slack webhook URLs, generic webhook URLs, Telegram bot tokens) live only inside the
senders: they are masked in every error text, never logged, never stored, never in a repr. A
failed POST becomes a ``DeliveryError`` that says whether the receiver asked us to come back later
(``retry_after_s``) or the channel's configuration is wrong (``config_problem``); what to do about
it is decided in ``delivery.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar, Literal
from urllib.parse import quote, urlsplit

import httpx
from pydantic import SecretStr

from taskzilla_sleep.alerts.message import AlertMessage
from taskzilla_sleep.alerts.render import Json, slack_payload, telegram_payload, webhook_payload
from taskzilla_sleep.core.errors import ConfigError, DeliveryError
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings

ChannelKind = Literal["slack", "telegram", "webhook"]

TELEGRAM_API_BASE = "https://api.telegram.org"
TELEGRAM_API_BASE_ENV = "TASKZILLA_TELEGRAM_API_BASE"  # a local Bot API server, or a test receiver
ERROR_MAX = 200  # an error text is cut to this wherever it goes: the exception, the log, the outbox
DETAIL_MAX = 120  # the part of a receiver's answer quoted in the error
MASK = "***"


def _secret_variants(values: Sequence[str]) -> list[str]:
    found: set[str] = set()
    for v in values:
        if len(v) >= 4:
            found |= {v, quote(v, safe=""), quote(v, safe="/:")}
    return sorted(found, key=len, reverse=True)  # longest first: a URL is masked whole, not in pieces


def _url_secrets(url: str) -> list[str]:
    """A webhook URL is a credential: its path and query (and any password) are secret, the host is not."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if len(s) >= 8]
    pq = parts.path + (f"?{parts.query}" if parts.query else "")
    return [url, pq, parts.path, parts.query, parts.password or "", *segments]


class Sender(ABC):
    """Posts an AlertMessage to one configured channel. Owns one httpx client; ``close()`` it."""

    kind: ClassVar[ChannelKind]

    def __init__(
        self,
        channel: str,
        url: str,
        secrets: Sequence[str],
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
        buttons: bool = False,
    ) -> None:
        self.channel = channel
        self.timeout_s = timeout_s
        self.buttons = buttons  # people resolve from this channel: contradiction alerts carry buttons
        self.deciders: tuple[str, ...] = ()  # who may click them (the channel's deciders; none: anyone)
        self._url = SecretStr(url)  # shown as ********** by vars(), debuggers and pydantic dumps
        self._secrets = _secret_variants(secrets)
        parts = urlsplit(url)
        self.host = f"{parts.hostname or '?'}{f':{parts.port}' if parts.port else ''}"
        # Explicit timeouts on every phase; redirects are not followed (a webhook that redirects
        # is misconfigured, and following it would re-send the body somewhere else).
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False, transport=transport)

    @abstractmethod
    def payload(self, msg: AlertMessage, idempotency_key: str) -> Json: ...

    def mask(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, MASK)
        return text

    def send(self, msg: AlertMessage, idempotency_key: str) -> str | None:
        """POST the message; on 2xx return the channel's id of the posted message (None when the
        channel gives none), else raise DeliveryError (secret-free)."""
        body = self.payload(msg, idempotency_key)
        # The key goes in a header on every channel: receivers and proxies that understand it
        # dedupe retries; Slack and Telegram ignore it.
        resp = self._post(self._url.get_secret_value(), body, {"Idempotency-Key": idempotency_key})
        return self.message_ref(resp)

    def message_ref(self, resp: httpx.Response) -> str | None:
        return None

    def _post(self, url: str, body: Json, headers: dict[str, str] | None = None) -> httpx.Response:
        """POST ``body`` as JSON; the response on 2xx, else DeliveryError (secret-free)."""
        try:
            resp = self._client.post(url, json=body, headers=headers)
        except httpx.TimeoutException:
            # `from None`: the httpx exception carries the request URL, i.e. the secret.
            raise DeliveryError(f"timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise DeliveryError(self.mask(f"{type(exc).__name__}: {exc}")[:ERROR_MAX]) from None
        if 200 <= resp.status_code < 300:
            return resp
        status = resp.status_code
        detail = self.mask(self._detail(resp))
        raise DeliveryError(
            f"HTTP {status}" + (f": {detail}" if detail else ""),
            status=status,
            retry_after_s=self._retry_after(resp),
            # A redirect (not followed) or a 4xx is the config; 408/409/425/429 ask us to come back.
            config_problem=300 <= status < 500 and status not in (408, 409, 425, 429),
        )

    def _detail(self, resp: httpx.Response) -> str:
        try:
            text = resp.text
        except (UnicodeDecodeError, httpx.HTTPError):
            return ""
        return " ".join(text.split())[:DETAIL_MAX]

    def _retry_after(self, resp: httpx.Response) -> float | None:
        raw = resp.headers.get("Retry-After", "")
        try:
            return max(0.0, float(raw)) if raw else None
        except ValueError:
            return None  # an HTTP-date: our own backoff is good enough

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(channel={self.channel!r}, host={self.host!r})"


class SlackSender(Sender):
    kind: ClassVar[ChannelKind] = "slack"

    def __init__(
        self,
        channel: str,
        url: str,
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
        buttons: bool = False,
    ) -> None:
        super().__init__(channel, url, _url_secrets(url), timeout_s, transport, buttons)

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Json:
        return slack_payload(msg, buttons=self.buttons, deciders=self.deciders)


class WebhookSender(Sender):
    kind: ClassVar[ChannelKind] = "webhook"

    def __init__(self, channel: str, url: str, timeout_s: float, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(channel, url, _url_secrets(url), timeout_s, transport)

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Json:
        return webhook_payload(msg, idempotency_key)


class TelegramSender(Sender):
    kind: ClassVar[ChannelKind] = "telegram"

    def __init__(
        self,
        channel: str,
        token: str,
        chat_id: str,
        timeout_s: float,
        api_base: str = TELEGRAM_API_BASE,
        transport: httpx.BaseTransport | None = None,
        buttons: bool = False,
    ) -> None:
        bot = f"{api_base.rstrip('/')}/bot{token}"
        url = f"{bot}/sendMessage"
        # The token is "<bot id>:<secret>"; mask the whole token and the secret half on its own.
        super().__init__(channel, url, [url, bot, token, token.partition(":")[2]], timeout_s, transport, buttons)
        self._bot = SecretStr(bot)
        self.chat_id = chat_id

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Json:
        return telegram_payload(msg, self.chat_id, buttons=self.buttons, deciders=self.deciders)

    def message_ref(self, resp: httpx.Response) -> str | None:
        """sendMessage answers ``{"ok": true, "result": {"message_id": 42, ...}}``: later replies thread to it."""
        try:
            ref = resp.json()["result"]["message_id"]
        except (ValueError, KeyError, TypeError):
            return None
        return str(ref) if isinstance(ref, int) else None

    def call(self, method: str, body: Json) -> None:
        """Another Bot API method (answerCallbackQuery, editMessageReplyMarkup); DeliveryError on failure."""
        self._post(f"{self._bot.get_secret_value()}/{method}", body)

    def _detail(self, resp: httpx.Response) -> str:
        try:
            data = resp.json()
        except ValueError:
            return super()._detail(resp)
        desc = data.get("description") if isinstance(data, dict) else None
        return " ".join(str(desc).split())[:DETAIL_MAX] if desc else super()._detail(resp)

    def _retry_after(self, resp: httpx.Response) -> float | None:
        try:
            data = resp.json()
            return float(data["parameters"]["retry_after"])
        except (ValueError, KeyError, TypeError):
            return super()._retry_after(resp)


def build_sender(
    name: str, ch: AlertChannel, timeout_s: float, env: Mapping[str, str], transport: httpx.BaseTransport | None = None
) -> Sender:
    """One channel's sender (the chat endpoints use it to call the Bot API); ConfigError as build_senders."""
    return _build_sender(name, ch, timeout_s, env, transport)


def env_secret(env: Mapping[str, str], name: str, ch: AlertChannel, var: str | None, option: str, what: str) -> str:
    """A channel's secret from the environment variable the setting names; ConfigError naming both."""
    return _env_secret(env, name, ch.kind, var, option, what)


def _env_secret(env: Mapping[str, str], name: str, kind: str, var: str | None, option: str, what: str) -> str:
    where = f"alerts.channels.{name} ({kind})"
    if not var:
        raise ConfigError(f"config error: {where}: set {option} to the name of the environment variable holding {what}")
    value = env.get(var, "").strip()
    if not value:
        raise ConfigError(f"config error: {where}: environment variable {var} is not set (it must hold {what})")
    return value


def _check_url(name: str, kind: str, var: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # Never echo the value: it is a credential.
        raise ConfigError(f"config error: alerts.channels.{name} ({kind}): {var} does not hold an http(s) URL")


def build_senders(
    settings: AlertSettings, env: Mapping[str, str], *, transport: httpx.BaseTransport | None = None
) -> dict[str, Sender]:
    """One sender per enabled channel; URLs and tokens from the env vars the settings name.

    Raises ConfigError naming the channel and the variable when one is missing. Close the
    senders with ``close_senders`` when done.
    """
    senders: dict[str, Sender] = {}
    try:
        for name, ch in settings.channels.items():
            if ch.enabled:
                senders[name] = _build_sender(name, ch, settings.timeout_s, env, transport)
    except ConfigError:
        close_senders(senders)
        raise
    return senders


def _build_sender(
    name: str, ch: AlertChannel, timeout_s: float, env: Mapping[str, str], transport: httpx.BaseTransport | None
) -> Sender:
    if ch.kind == "telegram":
        token = _env_secret(env, name, ch.kind, ch.token_env, "token_env", "the bot token")
        if not ch.chat_id:
            raise ConfigError(f"config error: alerts.channels.{name} (telegram): chat_id is required")
        base = env.get(TELEGRAM_API_BASE_ENV, "").strip() or TELEGRAM_API_BASE
        sender: Sender = TelegramSender(
            name, token, ch.chat_id, timeout_s, api_base=base, transport=transport, buttons=ch.interactive
        )
    else:
        url = _env_secret(env, name, ch.kind, ch.url_env, "url_env", "the webhook URL")
        _check_url(name, ch.kind, str(ch.url_env), url)
        if ch.kind == "slack":
            sender = SlackSender(name, url, timeout_s, transport=transport, buttons=ch.interactive)
        else:
            sender = WebhookSender(name, url, timeout_s, transport=transport)
    sender.deciders = tuple(ch.deciders)
    return sender


def close_senders(senders: Mapping[str, Sender]) -> None:
    for s in senders.values():
        s.close()
