"""An AlertMessage as each channel wants it: plain text, Telegram HTML, Slack blocks, webhook JSON.

Pure functions of the message (no network, no store), so a payload can be checked byte for byte in
unit tests. Each channel has its own limit and its own escaping; when a message is too long, the
longest non-essential bodies are shortened on their raw text and rendered again, so a cut never
lands inside an escape sequence or a tag.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from taskzilla_sleep.alerts.actions import (
    KEEPS,
    LABELS,
    SLACK_ACTIONS_BLOCK,
    SLACK_CONSOLE_ACTION,
    SLACK_DECIDERS_BLOCK,
    SLACK_HOW_BLOCK,
    SLACK_KEEP_PREFIX,
    telegram_callback,
)
from taskzilla_sleep.alerts.message import AlertMessage, Section, render_plain
from taskzilla_sleep.core.text import ELLIPSIS, one_line

Json = dict[str, Any]  # a JSON body

TELEGRAM_MAX_CHARS = 4096  # Bot API sendMessage limit (measured here in UTF-16 units, like Telegram)
SLACK_HEADER_MAX = 150
SLACK_SECTION_MAX = 3000
SLACK_MAX_BLOCKS = 50
SLACK_BUTTON_TEXT_MAX = 75
SLACK_VALUE_MAX = 2000  # a button's value
SLACK_URL_MAX = 3000  # a link button's url
CONSOLE_LABEL = "Open in console"


def who_decides(deciders: Sequence[str], kind: str) -> str:
    """What a contradiction alert with buttons says about who may click them (plain text)."""
    if not deciders:
        return f"Anyone in this {'chat' if kind == 'telegram' else 'channel'} may decide."
    return f"Only {', '.join(deciders)} may decide ({'Telegram' if kind == 'telegram' else 'Slack'} user ids)."


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


# -- Telegram ------------------------------------------------------------------------------------


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


def telegram_keyboard(msg: AlertMessage) -> Json | None:
    """An inline keyboard: one row of keep new / old / both, and a console link when there is one."""
    if msg.kind != "contradiction":
        return None
    rows: list[list[Json]] = [[{"text": LABELS[k], "callback_data": telegram_callback(msg.id, k)} for k in KEEPS]]
    if msg.console_url:
        rows.append([{"text": CONSOLE_LABEL, "url": msg.console_url}])
    return {"inline_keyboard": rows}


def _telegram_deciders(deciders: Sequence[str]) -> str:
    """Who may decide, each a mention by user id (the ids are digits: checked by the settings)."""
    if not deciders:
        return "<i>Anyone in this chat may decide.</i>"
    people = ", ".join(f'<a href="tg://user?id={_tg_escape(d)}">user {_tg_escape(d)}</a>' for d in deciders)
    return f"<i>Only {people} may decide.</i>"


def telegram_payload(msg: AlertMessage, chat_id: str, buttons: bool = False, deciders: Sequence[str] = ()) -> Json:
    """Bot API ``sendMessage`` body: HTML parse mode, escaped, within 4096 characters; with
    ``buttons`` a contradiction gets its inline keyboard and says who may decide (``deciders``: the
    channel's; none: anyone in the chat), and a resolution replies to its alert."""
    keyboard = telegram_keyboard(msg) if buttons else None
    foot = f"\n\n{_telegram_deciders(deciders)}" if keyboard is not None else ""

    def html_text(sections: Sequence[Section]) -> str:
        return _telegram_html(msg.title, sections) + foot

    _, text, ok = _fit(msg.sections, html_text, TELEGRAM_MAX_CHARS, utf16_len)
    body: Json = {"chat_id": chat_id, "link_preview_options": {"is_disabled": True}}
    if keyboard is not None:
        body["reply_markup"] = keyboard
    if msg.reply_to is not None and msg.reply_to.isdigit():
        body["reply_parameters"] = {"message_id": int(msg.reply_to), "allow_sending_without_reply": True}
    if ok:
        return body | {"text": text, "parse_mode": "HTML"}
    # Only essential parts left and still too long: plain text can be clipped anywhere safely (who may
    # decide goes first: the end is what is clipped).
    plain = render_plain(msg)
    if keyboard is not None:
        plain = f"{who_decides(deciders, 'telegram')}\n\n{plain}"
    return body | {"text": _clip_utf16(plain, TELEGRAM_MAX_CHARS)}


# -- Slack ---------------------------------------------------------------------------------------


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


def _slack_deciders(deciders: Sequence[str]) -> str:
    """Who may decide, each a Slack mention (the ids are checked by the settings: no markup can hide in one)."""
    if not deciders:
        return "Anyone in this channel may decide."
    return f"Only {', '.join(f'<@{d}>' for d in deciders)} may decide."


def _slack_button(text: str, action_id: str, **extra: str) -> Json:
    label = {"type": "plain_text", "text": one_line(text, SLACK_BUTTON_TEXT_MAX), "emoji": False}
    return {"type": "button", "action_id": action_id, "text": label, **extra}


def slack_actions(msg: AlertMessage) -> Json | None:
    """The actions block of a contradiction: keep new / old / both, and "Open in console" (a link)."""
    if msg.kind != "contradiction" or len(msg.id) > SLACK_VALUE_MAX:
        return None
    elements = [_slack_button(LABELS[k], SLACK_KEEP_PREFIX + k, value=msg.id) for k in KEEPS]
    elements[0]["style"] = "primary"
    if msg.console_url and len(msg.console_url) <= SLACK_URL_MAX:
        elements.append(_slack_button(CONSOLE_LABEL, SLACK_CONSOLE_ACTION, url=msg.console_url))
    return {"type": "actions", "block_id": SLACK_ACTIONS_BLOCK, "elements": elements}


def slack_payload(msg: AlertMessage, buttons: bool = False, deciders: Sequence[str] = ()) -> Json:
    """Incoming-webhook body: ``text`` (the notification fallback) and ``blocks`` of mrkdwn sections;
    with ``buttons``, a contradiction ends with who may decide (``deciders``, mentioned; none: anyone
    in the channel) and its actions block (neither cut by the block limit)."""
    blocks: list[Json] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": one_line(msg.title, SLACK_HEADER_MAX), "emoji": False},
        }
    ]
    for s in msg.sections:
        for n, piece in enumerate(_slack_pieces(s)):
            _, text, _ok = _fit([piece], _slack_mrkdwn, SLACK_SECTION_MAX, force=True)
            block: Json = {"type": "section", "text": {"type": "mrkdwn", "text": text[:SLACK_SECTION_MAX]}}
            if s.how:  # found again by its id when the alert is updated after the decision
                block["block_id"] = SLACK_HOW_BLOCK + (f"_{n}" if n else "")
            blocks.append(block)
    actions = slack_actions(msg) if buttons else None
    room = SLACK_MAX_BLOCKS - (2 if actions else 0)
    if len(blocks) > room:
        blocks = blocks[: room - 1] + [{"type": "context", "elements": [{"type": "mrkdwn", "text": "(truncated)"}]}]
    if actions:
        who = [{"type": "mrkdwn", "text": _slack_deciders(deciders)}]
        blocks.append({"type": "context", "block_id": SLACK_DECIDERS_BLOCK, "elements": who})
        blocks.append(actions)
    fallback = f"{msg.title} ({msg.id})" if msg.kind == "contradiction" else msg.title
    return {"text": _slack_escape(one_line(fallback, SLACK_SECTION_MAX)), "blocks": blocks}


# -- generic webhook -----------------------------------------------------------------------------


def webhook_payload(msg: AlertMessage, idempotency_key: str) -> Json:
    """Generic JSON webhook body: the structured alert plus its plain text."""
    body: Json = {
        "type": msg.kind,
        "id": msg.id,
        "team": msg.team,
        "title": msg.title,
        "text": render_plain(msg),
        "idempotency_key": idempotency_key,
    }
    data = msg.model_dump(mode="json")  # one serialisation for every time: ISO 8601, "Z" for UTC
    if msg.kind == "contradiction":
        body |= {k: data[k] for k in ("reason", "opened_at", "old", "new", "resolve")}
    elif msg.kind == "resolution":
        body |= {"contradiction_id": msg.id} | {
            k: data[k] for k in ("resolution", "resolved_by", "resolved_at", "note", "reply_to", "old", "new")
        }
    if msg.console_url:
        body["console_url"] = msg.console_url
    return body
