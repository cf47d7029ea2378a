"""Slack's side of resolving from chat: request signatures and the interaction payload.

Slack signs every request with the app's signing secret: ``X-Slack-Signature`` is ``v0=`` + the
hex HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{raw body}``. A request is taken only when the
timestamp is a Unix time (digits only) within five minutes of our clock, the signature matches
(compared in constant time), and the same signature was not seen before in that window by any
replica (the graph store remembers it): a replayed request is refused wherever it lands.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from taskzilla_sleep.alerts.actions import Click, parse_slack_action
from taskzilla_sleep.core.errors import BadRequest, Unauthorized
from taskzilla_sleep.stores.ports import SessionStore

WINDOW_S = 300  # Slack's advice: refuse a request more than five minutes away from now
VERSION = "v0"
UNIX_TIME = re.compile(r"[0-9]{1,12}")  # ASCII digits: int() would take " 12", "1_2", "١٢" or 400 digits


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """What Slack sends in ``X-Slack-Signature`` for ``body`` at ``timestamp``."""
    base = f"{VERSION}:{timestamp}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret, base, hashlib.sha256).hexdigest()


class SignatureCheck:
    """Verifies requests against one or more signing secrets; the signatures it took are remembered in
    the graph store (``remember_request``) until their timestamp is stale anyway."""

    def __init__(self, seen: SessionStore, window_s: float = WINDOW_S, clock: Callable[[], float] = time.time) -> None:
        self.seen = seen
        self.window_s = window_s
        self.clock = clock

    def verify(self, secrets: Sequence[bytes], timestamp: str | None, sig: str | None, body: bytes) -> list[int]:
        """The indexes of ``secrets`` that signed ``body``; Unauthorized (nothing remembered) when none
        did, the timestamp is missing or stale, or the signature was already used."""
        if not timestamp or not sig:
            raise Unauthorized("missing X-Slack-Request-Timestamp or X-Slack-Signature")
        if not UNIX_TIME.fullmatch(timestamp):
            raise Unauthorized("X-Slack-Request-Timestamp is not a Unix time")
        ts = int(timestamp)
        now = self.clock()
        if abs(now - ts) > self.window_s:
            raise Unauthorized(f"the request timestamp is more than {self.window_s:g} s from now (stale or replayed)")
        # Every secret is compared (in constant time), not only up to the first match.
        matched = [i for i, s in enumerate(secrets) if hmac.compare_digest(signature(s, timestamp, body), sig)]
        if not matched:
            raise Unauthorized("the Slack signature does not match (check the signing secret)")
        key = "slack:" + hashlib.sha256(sig.encode("utf-8")).hexdigest()
        if not self.seen.remember_request(key, int(now * 1000), int((ts + self.window_s + 1) * 1000)):
            raise Unauthorized("this signed request was already received (replayed)")
        return matched


@dataclass(frozen=True)
class Interaction:
    """A button click in a Slack message, as far as resolving needs it."""

    user_id: str
    user_name: str
    channel_id: str
    click: Click | None  # None: the console link (nothing to do)
    response_url: str
    blocks: list[Any]  # the message's blocks as Slack shows them (to update it in place)

    @property
    def by(self) -> str:
        return f"slack:{self.user_id}" + (f" ({self.user_name})" if self.user_name else "")


def _str(d: Any, *path: str) -> str:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d if isinstance(d, str) else ""


def parse_interaction(body: bytes) -> Interaction:
    """The form-encoded ``payload=`` of a ``block_actions`` request; BadRequest naming what is wrong."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, RecursionError):
        raise BadRequest("the body is not a Slack interaction (a form with a JSON `payload`)") from None
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        raise BadRequest(f"interaction type {str(_str(payload, 'type'))[:40]!r} is not handled (block_actions only)")
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise BadRequest("the interaction carries no action")
    user_id, channel_id = _str(payload, "user", "id"), _str(payload, "channel", "id")
    if not user_id or not channel_id:
        raise BadRequest("the interaction names no user or no channel")
    response_url = _str(payload, "response_url")
    if urlsplit(response_url).scheme not in ("http", "https"):
        raise BadRequest("the interaction has no response_url")
    message = payload.get("message")
    blocks = message.get("blocks") if isinstance(message, dict) else None
    return Interaction(
        user_id=user_id,
        user_name=_str(payload, "user", "username") or _str(payload, "user", "name"),
        channel_id=channel_id,
        click=parse_slack_action(_str(actions[0], "action_id"), _str(actions[0], "value")),
        response_url=response_url,
        blocks=blocks if isinstance(blocks, list) else [],
    )
