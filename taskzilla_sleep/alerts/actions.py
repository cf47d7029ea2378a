"""The buttons of a contradiction alert, as data both ways: what a button carries, and what a click means.

Pure (no network, no store). A Slack button carries the choice in its ``action_id`` and the
contradiction id in its ``value``; a Telegram button carries both in ``callback_data``, which
Telegram limits to 64 bytes: an id too long for it is sent as a digest (``#`` + 20 hex) and looked
up among the contradictions the channel was alerted about.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from taskzilla_sleep.core.errors import BadRequest
from taskzilla_sleep.rules.resolution import Keep

KEEPS: tuple[Keep, ...] = ("new", "old", "both")
LABELS: dict[Keep, str] = {"new": "Keep new", "old": "Keep old", "both": "Keep both"}
SLACK_KEEP_PREFIX = "tz_keep_"  # action_id tz_keep_new / tz_keep_old / tz_keep_both
SLACK_CONSOLE_ACTION = "tz_open_console"  # a link button: Slack reports the click, nothing to do
SLACK_ACTIONS_BLOCK = "tz_resolve"
# Blocks that only matter until a person decides (dropped when the alert is updated in place):
# how to decide (its commands; ``tz_how``, ``tz_how_1`` … when split) and who may decide.
SLACK_HOW_BLOCK = "tz_how"
SLACK_DECIDERS_BLOCK = "tz_deciders"
TELEGRAM_PREFIX = "tz"
TELEGRAM_CALLBACK_MAX = 64  # bytes (Bot API InlineKeyboardButton.callback_data)
DIGEST_MARK = "#"
DIGEST_HEX = 20


@dataclass(frozen=True)
class Click:
    """A person's choice on an alert: keep ``keep`` for the contradiction ``ref`` (its id, or a digest)."""

    keep: Keep
    ref: str

    @property
    def is_digest(self) -> bool:
        return self.ref.startswith(DIGEST_MARK)


def digest(contradiction_id: str) -> str:
    return DIGEST_MARK + hashlib.sha256(contradiction_id.encode("utf-8")).hexdigest()[:DIGEST_HEX]


def telegram_callback(contradiction_id: str, keep: Keep) -> str:
    """``tz:new:con_…`` (≤ 64 bytes), or ``tz:new:#<digest>`` for an id too long for that."""
    data = f"{TELEGRAM_PREFIX}:{keep}:{contradiction_id}"
    if len(data.encode("utf-8")) <= TELEGRAM_CALLBACK_MAX:
        return data
    return f"{TELEGRAM_PREFIX}:{keep}:{digest(contradiction_id)}"


def _keep(raw: str, where: str) -> Keep:
    if raw not in KEEPS:
        raise BadRequest(f"{where}: unknown choice {raw[:20]!r} (one of {', '.join(KEEPS)})")
    return raw


def parse_telegram_callback(data: str) -> Click:
    prefix, _, rest = data.partition(":")
    keep, _, ref = rest.partition(":")
    if prefix != TELEGRAM_PREFIX or not ref:
        raise BadRequest(f"callback_data {data[:64]!r} is not one of this worker's buttons")
    return Click(_keep(keep, "callback_data"), ref)


def parse_slack_action(action_id: str, value: str) -> Click | None:
    """The click of a resolve button; None for the console link (Slack reports those clicks too)."""
    if action_id == SLACK_CONSOLE_ACTION:
        return None
    if not action_id.startswith(SLACK_KEEP_PREFIX) or not value:
        raise BadRequest(f"action {action_id[:64]!r} is not one of this worker's buttons")
    return Click(_keep(action_id.removeprefix(SLACK_KEEP_PREFIX), "action_id"), value)
