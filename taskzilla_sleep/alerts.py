"""Chat alerts: the contradiction message, a durable outbox in the graph, delivery with retries.

The flow, and why each part is shaped the way it is:

1. reflect opens a contradiction (one atomic graph write). Nothing about alerts happens there.
2. ``Outbox.sync_contradictions`` finds every OPEN contradiction and MERGEs one ``Alert`` node per
   enabled channel, keyed ``{contradiction_id}:{channel}``. Queueing is a sync over the graph, not
   a side effect of opening, so a crash between the two loses nothing (the next sync finds it),
   and the key makes it impossible to queue the same alert twice.
3. The message is rendered once, at queueing, and stored in the node (``payload_json``): every
   retry, on any replica, after any restart, sends the same content with the same
   ``Idempotency-Key``.
4. ``deliver_due`` claims due alerts one at a time per channel (a claim pushes ``next_attempt_at``
   out by a short lease, so two replicas never post the same alert concurrently), posts them, and
   marks each delivered or schedules its next attempt with exponential backoff and jitter. After
   ``max_attempts`` an alert is ``failed``: kept and listed, never deleted, and a person can
   ``requeue_failed`` it once the channel is fixed. Delivery is at-least-once (a crash after the
   POST and before the mark repeats it, with the same key).

Secrets (Slack webhook URLs, generic webhook URLs, Telegram bot tokens) live only inside the
senders: they are masked in every error text, never logged, never stored, never in a repr.
"""

from __future__ import annotations

import builtins
import html
import json
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, ClassVar, Literal
from urllib.parse import quote, urlsplit

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, SecretStr

from taskzilla_sleep.errors import ConfigError, DeliveryError, StoreError
from taskzilla_sleep.models import Contradiction, ContradictionKind, Episode, EpisodeStatus, Pattern
from taskzilla_sleep.settings import AlertChannel, AlertSettings
from taskzilla_sleep.stores.ports import AlertKind, AlertRecord, AlertStatus, GraphStore

log = structlog.get_logger(__name__)

ChannelKind = Literal["slack", "telegram", "webhook"]
Row = dict[str, Any]

CLI = "taskzilla-sleep"
KEEP_CHOICES = "new|old|both"
EXAMPLES_PER_BELIEF = 2
EXAMPLE_CHARS = 160
TELEGRAM_MAX_CHARS = 4096  # Bot API sendMessage limit (measured here in UTF-16 units, like Telegram)
TELEGRAM_API_BASE = "https://api.telegram.org"
TELEGRAM_API_BASE_ENV = "TASKZILLA_TELEGRAM_API_BASE"  # a local Bot API server, or a test receiver
SLACK_HEADER_MAX = 150
SLACK_SECTION_MAX = 3000
SLACK_MAX_BLOCKS = 50
LAST_ERROR_MAX = 200
DETAIL_MAX = 120
MASK = "***"
CLAIM_RACES = 8  # claims lost to another replica before a channel gives up its round
ELLIPSIS = "…"


# -- the message -------------------------------------------------------------------------------


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Example(_Frozen):
    """One episode that supports a belief, as shown in chat (text already trimmed)."""

    episode_id: str
    author: str
    channel: str
    ts: datetime
    text: str


class Belief(_Frozen):
    """One side of a contradiction: the statement and its evidence ledger."""

    id: str
    statement: str
    kind: str
    status: str
    evidence: int  # supporting episodes
    against: int  # counter-evidence
    confidence: float
    first_seen: datetime
    last_seen: datetime
    examples: tuple[Example, ...] = ()


class HttpResolve(_Frozen):
    method: Literal["POST"] = "POST"
    path: str
    body: dict[str, str]


class Resolve(_Frozen):
    """Exactly how a person resolves the contradiction, on the command line or over HTTP."""

    contradiction_id: str
    cli: str
    http: HttpResolve
    options: dict[str, str]


class Section(_Frozen):
    """A block of the message. Renderers map it to a Slack section, Telegram HTML or plain text."""

    heading: str | None = None
    body: str = ""
    code: tuple[str, ...] = ()  # commands, shown verbatim (monospace where the channel has it)
    essential: bool = False  # never trimmed to fit a channel's limit (who/what and how to resolve)


class AlertMessage(_Frozen):
    """What an alert says, independent of the channel: title, sections (plain text) and structured fields."""

    kind: AlertKind
    id: str  # the contradiction id, or the summary key
    team: str | None = None
    title: str
    sections: tuple[Section, ...]
    reason: str | None = None
    contradiction_kind: str | None = None  # "update" (a change to confirm) or "disagreement"
    opened_at: datetime | None = None
    old: Belief | None = None
    new: Belief | None = None
    resolve: Resolve | None = None

    @property
    def text(self) -> str:
        """The whole message as plain text."""
        return render_plain(self)


def trim(text: str, limit: int = EXAMPLE_CHARS) -> str:
    """One line, at most ``limit`` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + ELLIPSIS


def _day(t: datetime, tz: tzinfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d")


def _minute(t: datetime, tz: tzinfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z").strip()


def _belief(p: Pattern, examples: Sequence[Episode]) -> Belief:
    return Belief(
        id=p.id,
        statement=p.statement,
        kind=p.kind.value,
        status=p.status.value,
        evidence=p.support_count,
        against=p.counter_count,
        confidence=round(p.confidence, 4),
        first_seen=p.first_seen,
        last_seen=p.last_seen,
        examples=tuple(
            Example(episode_id=e.id, author=e.author, channel=e.channel, ts=e.ts, text=trim(e.text))
            for e in list(examples)[:EXAMPLES_PER_BELIEF]
        ),
    )


def _belief_section(label: str, b: Belief, tz: tzinfo) -> Section:
    plural = "" if b.evidence == 1 else "s"
    against = f", {b.against} against" if b.against else ""
    lines = [
        f"\u201c{b.statement}\u201d",
        f"Evidence: {b.evidence} episode{plural}{against} · confidence {b.confidence:.2f} · "
        f"first seen {_day(b.first_seen, tz)} · last seen {_day(b.last_seen, tz)}",
    ]
    if b.examples:
        lines.append("Examples:")
        lines += [f"- {e.author}, {_minute(e.ts, tz)} in {e.channel}: \u201c{e.text}\u201d" for e in b.examples]
    # Not essential: if a channel's limit bites, the examples at the end go first.
    return Section(heading=f"{label} belief {b.id} ({b.status})", body="\n".join(lines))


def resolve_instructions(contradiction_id: str) -> Resolve:
    body = {"keep": KEEP_CHOICES, "by": "NAME", "note": "..."}
    return Resolve(
        contradiction_id=contradiction_id,
        cli=f"{CLI} contradictions resolve {contradiction_id} --keep {KEEP_CHOICES} --by NAME [--note TEXT]",
        http=HttpResolve(path=f"/contradictions/{contradiction_id}/resolve", body=body),
        options={
            "new": "the new belief holds; the old one is superseded (archived with who, when and why)",
            "old": "the old belief holds; the new one is superseded",
            "both": "both hold (e.g. in different contexts); both become active again",
        },
    )


def format_contradiction(
    c: Contradiction,
    old: Pattern,
    new: Pattern,
    old_examples: Sequence[Episode],
    new_examples: Sequence[Episode],
    *,
    tz: tzinfo = UTC,
) -> AlertMessage:
    """The alert for one contradiction: both beliefs, their evidence, the id and how to resolve it.

    ``tz`` is the team's zone for the dates shown (the worker passes ``schedule.timezone``).
    """
    ob, nb = _belief(old, old_examples), _belief(new, new_examples)
    how = resolve_instructions(c.id)
    choices = "\n".join(f"--keep {k}: {v}" for k, v in how.options.items())
    if c.kind is ContradictionKind.UPDATE:
        people = sorted({e.author for e in new_examples}) or ["the people who wrote the new messages"]
        confirm = f"{CLI} contradictions resolve {c.id} --keep new --by NAME"
        title = f"Change in {c.team} to confirm: {trim(new.statement, 80)}"
        intro = (
            f"The team seems to have changed a practice on {_day(new.first_seen, tz)}: from "
            f"\u201c{trim(old.statement, 200)}\u201d to \u201c{trim(new.statement, 200)}\u201d. "
            f"Confirm with {', '.join(people)}. Until a person decides, the bot uses the new belief marked "
            "\u201cchanged, awaiting confirmation\u201d and the old one is contested; nothing is superseded. "
            f"(Update {c.id}, opened {_minute(c.opened_at, tz)}.)"
        )
        resolve = Section(
            heading="How to confirm",
            body=f"If the change is real, confirm it with one command:\n{confirm}\nOtherwise:\n{choices}",
            code=(confirm, how.cli, f"{how.http.method} {how.http.path} {json.dumps(how.http.body)}"),
            essential=True,
        )
    else:
        title = f"Contradiction in {c.team}: people disagree"
        intro = (
            f"Contradiction {c.id} in team {c.team}, opened {_minute(c.opened_at, tz)}. People disagree: "
            "two beliefs are held at the same time. Both are kept and marked contested; nothing changes "
            "until a person decides."
        )
        resolve = Section(
            heading="How to resolve",
            body=f"Decide which belief holds:\n{choices}\nThen run one of:",
            code=(how.cli, f"{how.http.method} {how.http.path} {json.dumps(how.http.body)}"),
            essential=True,
        )
    if c.reason.strip():
        why = "Why it looks like a change" if c.kind is ContradictionKind.UPDATE else "Why they conflict"
        intro += f"\n{why}: {trim(c.reason, 300)}"
    return AlertMessage(
        kind="contradiction",
        id=c.id,
        team=c.team,
        contradiction_kind=c.kind.value,
        title=title,
        sections=(
            Section(body=intro, essential=True),
            _belief_section("OLD", ob, tz),
            _belief_section("NEW", nb, tz),
            resolve,
        ),
        reason=c.reason or None,
        opened_at=c.opened_at,
        old=ob,
        new=nb,
        resolve=how,
    )


def format_summary(
    text: str, *, key: str = "summary", team: str | None = None, title: str = "Nightly memory summary"
) -> AlertMessage:
    """An optional nightly summary (``alerts.nightly_summary``): free text, trimmed per channel."""
    return AlertMessage(kind="summary", id=key, team=team, title=title, sections=(Section(body=text.strip()),))


# -- rendering per channel (pure) -----------------------------------------------------------------


def _section_plain(s: Section) -> str:
    parts = [p for p in (s.heading, s.body) if p]
    parts += [f"  {c}" for c in s.code]
    return "\n".join(parts)


def render_plain(msg: AlertMessage) -> str:
    return "\n\n".join([msg.title, *(_section_plain(s) for s in msg.sections)])


def _cut(text: str, keep: int) -> str:
    return text[: max(0, keep)].rstrip() + ELLIPSIS if keep < len(text) else text


def _fit(
    sections: Sequence[Section],
    render: Callable[[Sequence[Section]], str],
    limit: int,
    measure: Callable[[str], int] = len,
    force: bool = False,
) -> tuple[list[Section], str, bool]:
    """Shorten the longest trimmable bodies until ``render(sections)`` fits ``limit``.

    Bodies are cut on the raw text (never inside an escape sequence or a tag) and re-rendered;
    every cut removes at least the overflow, so this converges in a few rounds.
    """
    out = list(sections)
    for _ in range(4 * len(out) + 4):
        rendered = render(out)
        over = measure(rendered) - limit
        if over <= 0:
            return out, rendered, True
        candidates = [i for i, s in enumerate(out) if (force or not s.essential) and s.body not in ("", ELLIPSIS)]
        if not candidates:
            break
        i = max(candidates, key=lambda k: len(out[k].body))
        out[i] = out[i].model_copy(update={"body": _cut(out[i].body, len(out[i].body) - over - 1)})
    rendered = render(out)
    return out, rendered, measure(rendered) <= limit


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units: an emoji counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def _clip_utf16(text: str, limit: int) -> str:
    if utf16_len(text) <= limit:
        return text
    out, n = [], 0
    for ch in text:
        w = 2 if ord(ch) > 0xFFFF else 1
        if n + w > limit - 1:
            break
        out.append(ch)
        n += w
    return "".join(out) + ELLIPSIS


def _tg_escape(text: str) -> str:
    # Telegram's HTML mode needs only &, < and > escaped (it knows &amp; &lt; &gt; &quot;).
    return html.escape(text, quote=False)


def _telegram_html(title: str, sections: Sequence[Section]) -> str:
    out = [f"<b>{_tg_escape(title)}</b>"]
    for s in sections:
        lines = [f"<b>{_tg_escape(s.heading)}</b>"] if s.heading else []
        if s.body:
            lines.append(_tg_escape(s.body))
        lines += [f"<code>{_tg_escape(c)}</code>" for c in s.code]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def telegram_payload(msg: AlertMessage, chat_id: str) -> Row:
    """Bot API ``sendMessage`` body: HTML parse mode, escaped, within 4096 characters."""
    _, text, ok = _fit(msg.sections, lambda ss: _telegram_html(msg.title, ss), TELEGRAM_MAX_CHARS, utf16_len)
    body: Row = {"chat_id": chat_id, "link_preview_options": {"is_disabled": True}}
    if ok:
        return body | {"text": text, "parse_mode": "HTML"}
    # Only essential parts left and still too long: plain text can be clipped anywhere safely.
    return body | {"text": _clip_utf16(render_plain(msg), TELEGRAM_MAX_CHARS)}


def _slack_escape(text: str) -> str:
    # Slack's three control characters; escaping them also defuses <!channel> and <@U123>
    # mentions smuggled into chat text that a belief or example quotes.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_mrkdwn(sections: Sequence[Section]) -> str:
    (s,) = sections
    parts = [f"*{_slack_escape(s.heading)}*"] if s.heading else []
    if s.body:
        parts.append(_slack_escape(s.body))
    if s.code:
        parts.append("```" + "\n".join(_slack_escape(c) for c in s.code) + "```")
    return "\n".join(parts)


def _slack_pieces(s: Section) -> Iterator[Section]:
    """A body longer than one section block goes on in further blocks (only the first has the heading)."""
    if len(s.body) <= SLACK_SECTION_MAX - 200:
        yield s
        return
    rest, first = s.body, True
    while rest:
        cut = rest.rfind("\n", 0, SLACK_SECTION_MAX - 200)
        cut = cut if cut > 0 else SLACK_SECTION_MAX - 200
        head, rest = rest[:cut], rest[cut:].lstrip("\n")
        yield s.model_copy(
            update={"heading": s.heading if first else None, "body": head, "code": () if rest else s.code}
        )
        first = False


def slack_payload(msg: AlertMessage) -> Row:
    """Incoming-webhook body: ``text`` (the notification fallback) and ``blocks`` of mrkdwn sections."""
    blocks: list[Row] = [
        {"type": "header", "text": {"type": "plain_text", "text": trim(msg.title, SLACK_HEADER_MAX), "emoji": False}}
    ]
    for s in msg.sections:
        for piece in _slack_pieces(s):
            _, text, _ok = _fit([piece], _slack_mrkdwn, SLACK_SECTION_MAX, force=True)
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:SLACK_SECTION_MAX]}})
    if len(blocks) > SLACK_MAX_BLOCKS:
        blocks = blocks[: SLACK_MAX_BLOCKS - 1] + [
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "(truncated)"}]}
        ]
    fallback = f"{msg.title} ({msg.id})" if msg.kind == "contradiction" else msg.title
    return {"text": _slack_escape(trim(fallback, SLACK_SECTION_MAX)), "blocks": blocks}


def webhook_payload(msg: AlertMessage, idempotency_key: str) -> Row:
    """Generic JSON webhook body: the structured alert plus its plain text."""
    body: Row = {
        "type": msg.kind,
        "id": msg.id,
        "team": msg.team,
        "title": msg.title,
        "text": render_plain(msg),
        "idempotency_key": idempotency_key,
    }
    if msg.kind == "contradiction":
        data = msg.model_dump(mode="json")  # one serialisation for every time: ISO 8601, "Z" for UTC
        body |= {k: data[k] for k in ("reason", "opened_at", "old", "new", "resolve")}
    return body


# -- senders --------------------------------------------------------------------------------------


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
    ) -> None:
        self.channel = channel
        self.timeout_s = timeout_s
        self._url = SecretStr(url)  # shown as ********** by vars(), debuggers and pydantic dumps
        self._secrets = _secret_variants(secrets)
        parts = urlsplit(url)
        self.host = f"{parts.hostname or '?'}{f':{parts.port}' if parts.port else ''}"
        # Explicit timeouts on every phase; redirects are not followed (a webhook that redirects
        # is misconfigured, and following it would re-send the body somewhere else).
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False, transport=transport)

    @abstractmethod
    def payload(self, msg: AlertMessage, idempotency_key: str) -> Row: ...

    def mask(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, MASK)
        return text

    def send(self, msg: AlertMessage, idempotency_key: str) -> None:
        """POST the message; return on 2xx, else raise DeliveryError (secret-free)."""
        body = self.payload(msg, idempotency_key)
        # The key goes in a header on every channel: receivers and proxies that understand it
        # dedupe retries; Slack and Telegram ignore it.
        headers = {"Idempotency-Key": idempotency_key}
        try:
            resp = self._client.post(self._url.get_secret_value(), json=body, headers=headers)
        except httpx.TimeoutException:
            # `from None`: the httpx exception carries the request URL, i.e. the secret.
            raise DeliveryError(f"timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise DeliveryError(self.mask(f"{type(exc).__name__}: {exc}")[:LAST_ERROR_MAX]) from None
        if 200 <= resp.status_code < 300:
            return
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

    def __init__(self, channel: str, url: str, timeout_s: float, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(channel, url, _url_secrets(url), timeout_s, transport)

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Row:
        return slack_payload(msg)


class WebhookSender(Sender):
    kind: ClassVar[ChannelKind] = "webhook"

    def __init__(self, channel: str, url: str, timeout_s: float, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(channel, url, _url_secrets(url), timeout_s, transport)

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Row:
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
    ) -> None:
        url = f"{api_base.rstrip('/')}/bot{token}/sendMessage"
        # The token is "<bot id>:<secret>"; mask the whole token and the secret half on its own.
        super().__init__(channel, url, [url, token, token.partition(":")[2]], timeout_s, transport)
        self.chat_id = chat_id

    def payload(self, msg: AlertMessage, idempotency_key: str) -> Row:
        return telegram_payload(msg, self.chat_id)

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
        return TelegramSender(name, token, ch.chat_id, timeout_s, api_base=base, transport=transport)
    url = _env_secret(env, name, ch.kind, ch.url_env, "url_env", "the webhook URL")
    _check_url(name, ch.kind, str(ch.url_env), url)
    cls = SlackSender if ch.kind == "slack" else WebhookSender
    return cls(name, url, timeout_s, transport=transport)


def close_senders(senders: Mapping[str, Sender]) -> None:
    for s in senders.values():
        s.close()


# -- the durable outbox ---------------------------------------------------------------------------


class Alert(BaseModel):
    """One queued message for one channel, as the outbox holds it, with its message read back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # the idempotency key: "{contradiction_id}:{channel}" / "{summary_key}:{channel}"
    channel: str
    channel_kind: str
    kind: AlertKind
    team: str | None = None
    contradiction_id: str | None = None
    message: AlertMessage
    status: AlertStatus
    attempts: int = 0
    next_attempt_at: datetime
    last_error: str | None = None
    created_at: datetime
    last_attempt_at: datetime | None = None
    delivered_at: datetime | None = None

    @classmethod
    def of(cls, r: AlertRecord) -> Alert:
        fields = r.model_dump(exclude={"payload_json"})
        return cls(**fields, message=AlertMessage.model_validate_json(r.payload_json))


ExamplesFor = Callable[[Pattern], Sequence[Episode]]


class Outbox:
    """The alerts in the graph store: queued idempotently, claimed, marked. Never deleted.

    The graph is not owned: whoever built it closes it. Safe to share between the threads of
    ``deliver_due`` (one graph call at a time from them).
    """

    def __init__(self, graph: GraphStore) -> None:
        self._graph = graph
        self._mutex = threading.Lock()
        self._closed = False

    @contextmanager
    def _store(self) -> Iterator[GraphStore]:
        with self._mutex:
            if self._closed:
                raise StoreError("alert outbox is closed")
            yield self._graph

    def close(self) -> None:
        self._closed = True

    def evidence_examples(self, pattern: Pattern) -> builtins.list[Episode]:
        """Two recent supporting episodes that still have their text, from different authors if possible."""
        with self._store() as g:
            found = g.get_episodes(pattern.evidence_ids)
        eps = [e for e in found if e.text.strip() and e.status not in (EpisodeStatus.RETIRED, EpisodeStatus.PRUNED)]
        eps.sort(key=lambda e: (e.ts, e.id), reverse=True)
        picked: builtins.list[Episode] = []
        for e in eps:
            if len(picked) < EXAMPLES_PER_BELIEF and all(p.author != e.author for p in picked):
                picked.append(e)
        picked += [e for e in eps if e not in picked][: EXAMPLES_PER_BELIEF - len(picked)]
        return sorted(picked, key=lambda e: (e.ts, e.id))

    def sync_contradictions(
        self,
        channels: Mapping[str, AlertChannel],
        now: datetime,
        examples_for: ExamplesFor | None = None,
        *,
        tz: tzinfo = UTC,
    ) -> int:
        """Queue an alert per enabled channel for every OPEN contradiction that lacks one.

        Idempotent (the key is unique): running it twice, or on two replicas, queues nothing twice.
        Returns how many alerts were queued.
        """
        enabled = sorted(n for n, ch in channels.items() if ch.enabled)
        if not enabled:
            return 0
        with self._store() as g:
            alerted = g.alerted_open_contradictions()
        todo = [(c, [n for n in enabled if n not in have]) for c, have in alerted]
        todo = [(c, missing) for c, missing in todo if missing]
        if not todo:
            return 0
        with self._store() as g:
            patterns = {p.id: p for p in g.patterns_by_id(sorted({i for c, _ in todo for i in c.pattern_ids}))}
        examples = examples_for or self.evidence_examples
        records: builtins.list[AlertRecord] = []
        for c, missing in todo:
            old, new = patterns.get(c.old_pattern_id), patterns.get(c.new_pattern_id)
            if old is None or new is None:
                log.warning("alert_not_queued", reason="belief_missing", contradiction_id=c.id)
                continue
            payload = format_contradiction(c, old, new, examples(old), examples(new), tz=tz).model_dump_json()
            records += [
                _new_alert(c.id, name, channels[name].kind, "contradiction", c.team, payload, now, c.id)
                for name in missing
            ]
        with self._store() as g:
            g.queue_alerts(records)
        if records:
            log.info("alerts_queued", kind="contradiction", alerts=len(records), contradictions=len(todo))
        return len(records)

    def enqueue_summary(self, key: str, text: str, channels: Mapping[str, AlertChannel], now: datetime) -> int:
        """Queue a summary (key e.g. ``summary_2026-11-28``) once per enabled channel; idempotent."""
        payload = format_summary(text, key=key).model_dump_json()
        records = [
            _new_alert(key, n, ch.kind, "summary", None, payload, now)
            for n, ch in sorted(channels.items())
            if ch.enabled
        ]
        if records:
            with self._store() as g:
                g.queue_alerts(records)
            log.info("alerts_queued", kind="summary", alerts=len(records))
        return len(records)

    def due(self, now: datetime, limit: int = 100) -> builtins.list[Alert]:
        """Pending alerts whose next attempt is due (read only; ``claim`` is what delivery uses)."""
        pending = [a for a in self.list("pending") if a.next_attempt_at <= now]
        return sorted(pending, key=lambda a: (a.next_attempt_at, a.key))[:limit]

    def claim(self, channel: str, now: datetime, lease: timedelta) -> Alert | None:
        """Take the next due alert of ``channel`` for one attempt: it is not due again for ``lease``."""
        with self._store() as g:
            record = g.claim_alert(channel, now, now + lease)
        return Alert.of(record) if record is not None else None

    def mark_delivered(self, key: str, now: datetime) -> bool:
        """False if it was already delivered (another replica, or a repeat after a crash)."""
        with self._store() as g:
            return g.mark_alert_delivered(key, now)

    def mark_failed_attempt(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        """Count a failed attempt; ``give_up`` makes it ``failed`` (kept and listed). Only pending alerts change."""
        with self._store() as g:
            return g.mark_alert_failed(key, now, " ".join(error.split())[:LAST_ERROR_MAX], next_at, give_up)

    def defer_channel(self, channel: str, until: datetime) -> int:
        """Push every pending alert of ``channel`` due before ``until`` to ``until`` (no attempt counted)."""
        with self._store() as g:
            return g.defer_alerts(channel, until)

    def requeue_failed(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        """Make failed alerts (all, or those ``keys``) pending again with a fresh attempt budget."""
        with self._store() as g:
            n = g.requeue_failed_alerts(now, keys)
        if n:
            log.info("alerts_requeued", alerts=n)
        return n

    def pending_count(self) -> int:
        with self._store() as g:
            return g.count_alerts("pending")

    def list(self, status: AlertStatus | None = None) -> builtins.list[Alert]:
        """Every alert (or those with ``status``), oldest first: failed ones stay here for people to see."""
        with self._store() as g:
            return [Alert.of(r) for r in g.alerts(status)]


def alert_key(item_id: str, channel: str) -> str:
    """The idempotency key: one alert per item and channel, ever."""
    return f"{item_id}:{channel}"


def _new_alert(
    item_id: str,
    channel: str,
    channel_kind: str,
    kind: AlertKind,
    team: str | None,
    payload: str,
    now: datetime,
    contradiction_id: str | None = None,
) -> AlertRecord:
    return AlertRecord(
        key=alert_key(item_id, channel),
        channel=channel,
        channel_kind=channel_kind,
        kind=kind,
        team=team,
        contradiction_id=contradiction_id,
        payload_json=payload,
        next_attempt_at=now,
        created_at=now,
    )


# -- delivery -------------------------------------------------------------------------------------


def backoff_delay(failures: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``failures``-th failed attempt: exponential, capped, "equal jitter".

    Half the capped delay is fixed and half random, so replicas and channels that failed together
    don't retry in lockstep, and the wait never drops below half the schedule.
    """
    ceiling = min(max_s, base_s * 2.0 ** min(max(failures - 1, 0), 60))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@dataclass
class ChannelReport:
    delivered: int = 0
    retried: int = 0  # failed this round, will be tried again
    failed: int = 0  # gave up this round (max_attempts reached)
    errors: builtins.list[str] = field(default_factory=builtins.list)  # secret-free


@dataclass
class DeliveryReport:
    by_channel: dict[str, ChannelReport] = field(default_factory=dict)

    @property
    def delivered(self) -> int:
        return sum(r.delivered for r in self.by_channel.values())

    @property
    def retried(self) -> int:
        return sum(r.retried for r in self.by_channel.values())

    @property
    def failed(self) -> int:
        return sum(r.failed for r in self.by_channel.values())


def deliver_due(
    outbox: Outbox,
    senders: Mapping[str, Sender],
    settings: AlertSettings,
    now: datetime,
    *,
    limit: int = 50,
    rng: random.Random | None = None,
) -> DeliveryReport:
    """Deliver the due alerts of every channel that has a sender; never raises for a channel's failure.

    Channels run in parallel (one thread each) so a channel that hangs until ``timeout_s`` delays
    nobody else. Within a channel, alerts go one at a time (at most ``limit`` a round); the first
    failure ends that channel's round, and a transient one (timeout, connection error, 429, 5xx)
    also defers the channel's other alerts to the same next attempt: they would fail the same way.
    Alerts of channels without a sender (removed or disabled in the config) stay pending and listed.
    """
    report = DeliveryReport(by_channel={name: ChannelReport() for name in senders})
    if not senders:
        return report
    with ThreadPoolExecutor(max_workers=min(len(senders), 8), thread_name_prefix="alerts") as pool:
        futures = [
            pool.submit(_deliver_channel, outbox, s, settings, now, limit, rng, report.by_channel[n])
            for n, s in sorted(senders.items())
        ]
        for name, f in zip(sorted(senders), futures, strict=True):
            try:
                f.result()  # _deliver_channel catches what it expects; this is the last guard
            except Exception as exc:
                report.by_channel[name].errors.append(type(exc).__name__)
                log.error("alert_channel_round_failed", channel=name, error=type(exc).__name__)
    if report.delivered or report.retried or report.failed:
        log.info(
            "alerts_delivery_round",
            delivered=report.delivered,
            retried=report.retried,
            failed=report.failed,
        )
    return report


def _deliver_channel(
    outbox: Outbox,
    sender: Sender,
    settings: AlertSettings,
    now: datetime,
    limit: int,
    rng: random.Random | None,
    rep: ChannelReport,
) -> None:
    # Long enough for one POST (with a margin for the graph writes around it); a worker that dies
    # mid-attempt has its alert retried after this.
    lease = timedelta(seconds=2 * settings.timeout_s + 30)
    started = time.monotonic()
    for _ in range(limit):
        try:
            alert = outbox.claim(sender.channel, now, lease)
        except Exception as exc:  # a store failure ends this channel's round, not the others'
            rep.errors.append(f"claim: {type(exc).__name__}")
            log.error("alert_claim_failed", channel=sender.channel, error=sender.mask(str(exc))[:LAST_ERROR_MAX])
            return
        if alert is None:
            return
        if not _attempt(outbox, sender, settings, alert, now, rng, rep):
            return
        if time.monotonic() - started > lease.total_seconds() / 2:
            return  # leave the rest for the next round rather than outlive our own claims


def _attempt(
    outbox: Outbox,
    sender: Sender,
    settings: AlertSettings,
    alert: Alert,
    now: datetime,
    rng: random.Random | None,
    rep: ChannelReport,
) -> bool:
    """One POST of one alert, recorded in the outbox. True if it was delivered."""
    ctx = {"alert_key": alert.key, "channel": sender.channel, "kind": alert.kind}
    try:
        sender.send(alert.message, alert.key)
    except Exception as exc:
        error = str(exc) if isinstance(exc, DeliveryError) else sender.mask(f"{type(exc).__name__}: {exc}")
        failures = alert.attempts + 1
        give_up = failures >= settings.max_attempts
        delay = backoff_delay(failures, settings.backoff_base_s, settings.backoff_max_s, rng)
        if isinstance(exc, DeliveryError) and exc.retry_after_s is not None:
            delay = max(delay, min(exc.retry_after_s, settings.backoff_max_s))
        next_at = now + timedelta(seconds=delay)
        try:
            outbox.mark_failed_attempt(alert.key, now, error, next_at, give_up)
        except Exception as store_exc:
            log.error("alert_mark_failed", **ctx, error=sender.mask(str(store_exc))[:LAST_ERROR_MAX])
        rep.errors.append(error[:LAST_ERROR_MAX])
        if not (isinstance(exc, DeliveryError) and exc.config_problem):
            # Down, overloaded or rate-limiting: the channel's other alerts back off with this
            # one, so a dead receiver gets one probe per backoff period, not one per alert.
            try:
                outbox.defer_channel(sender.channel, next_at)
            except Exception as store_exc:
                log.error("alert_defer_failed", **ctx, error=sender.mask(str(store_exc))[:LAST_ERROR_MAX])
        if give_up:
            rep.failed += 1
            log.error("alert_gave_up", **ctx, attempts=failures, error=error)
        else:
            rep.retried += 1
            config = isinstance(exc, DeliveryError) and exc.config_problem
            # A 4xx other than 408/409/425/429 means the channel's config is wrong: retried anyway
            # (it may be fixed while the alert waits), but loud.
            (log.error if config else log.warning)(
                "alert_config_problem" if config else "alert_retry",
                **ctx,
                attempts=failures,
                error=error,
                next_attempt_at=next_at.isoformat(),
            )
        return False
    try:
        outbox.mark_delivered(alert.key, now)
    except Exception as store_exc:
        # Posted but not recorded: it will be posted again after the lease, with the same key.
        log.error("alert_mark_failed", **ctx, error=sender.mask(str(store_exc))[:LAST_ERROR_MAX])
        rep.errors.append(f"delivered but not recorded: {type(store_exc).__name__}")
        rep.delivered += 1
        return False
    rep.delivered += 1
    log.info("alert_delivered", **ctx, attempts=alert.attempts + 1)
    return True
