"""Console sessions: a random id in an HttpOnly cookie, the caller's Access kept in the graph store.

The cookie never holds the API token, nor anything derived from it: a session id is 256 random
bits, and the store maps its SHA-256 (never the id itself: a copy of the graph logs nobody in) to
the :class:`~taskzilla_sleep.rules.access.Access` the token gave at login (name, teams, role), its CSRF
token and one-shot notices. Every replica reads the same store, so a load balancer needs no sticky
sessions. Sessions end at logout or after ``IDLE_S`` without a request; a restart keeps them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from taskzilla_sleep.rules.access import EVERY_TEAM, Access, Role
from taskzilla_sleep.stores.ports import SessionRecord, SessionStore

COOKIE = "tz_console"
LOGIN_COOKIE = "tz_console_login"  # the login form's own CSRF value (no session yet)
IDLE_S = 8 * 3600
MAX_SESSIONS = 1000
NOTICES_KEPT = 5
NOTICE_KINDS = ("ok", "error")
ROLES = ("read", "write", "admin")


def session_key(sid: str) -> str:
    """What the store knows a session by: the SHA-256 of the cookie's value."""
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()


@dataclass
class Session:
    id: str
    access: Access
    csrf: str
    last_seen: float
    notices: list[tuple[str, str]] = field(default_factory=list)  # (kind: ok|error, text), shown once

    @property
    def key(self) -> str:
        return session_key(self.id)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())

    def take_notices(self) -> list[tuple[str, str]]:
        out, self.notices = self.notices, []
        return out


class Sessions:
    """Live sessions, in the graph store (shared by replicas); ``clock`` is the wall clock in seconds."""

    def __init__(self, store: SessionStore, clock: Callable[[], float] = time.time, idle_s: float = IDLE_S) -> None:
        self._store = store
        self._clock = clock
        self._idle_s = idle_s

    def start(self, access: Access) -> Session:
        now = self._clock()
        s = Session(id=secrets.token_urlsafe(32), access=access, csrf=secrets.token_urlsafe(32), last_seen=now)
        teams = EVERY_TEAM if access.teams is None else ",".join(sorted(access.teams))
        ms = int(now * 1000)
        record = SessionRecord(s.key, access.name, teams, access.role, s.csrf, ms, ms)
        self._store.start_session(record, idle_before_ms=self._idle_before(now), keep=MAX_SESSIONS - 1)
        return s

    def get(self, sid: str | None, take_notices: bool = True) -> Session | None:
        """The live session of cookie value ``sid``, kept alive; its notices come with it (and are then
        gone from the store) when ``take_notices``: a page shows them once."""
        if not sid or len(sid) > 200:
            return None
        now = self._clock()
        r = self._store.touch_session(session_key(sid), int(now * 1000), self._idle_before(now), take_notices)
        if r is None or r.role not in ROLES:
            return None
        teams = None if r.teams == EVERY_TEAM else frozenset(t for t in r.teams.split(",") if t)
        access = Access(name=r.name, teams=teams, role=cast(Role, r.role))
        notices = [_notice(n) for n in r.notices] if take_notices else []
        return Session(id=sid, access=access, csrf=r.csrf, last_seen=r.last_seen_ms / 1000, notices=notices)

    def notice(self, s: Session, kind: str, text: str) -> None:
        """A message for the next page this session sees (whichever replica serves it)."""
        self._store.add_session_notice(s.key, f"{kind}:{text}", NOTICES_KEPT)

    def end(self, sid: str | None) -> None:
        if sid:
            self._store.end_session(session_key(sid))

    def _idle_before(self, now: float) -> int:
        return int((now - self._idle_s) * 1000)


def _notice(raw: str) -> tuple[str, str]:
    kind, _, text = raw.partition(":")
    return (kind, text) if kind in NOTICE_KINDS else ("ok", raw)
