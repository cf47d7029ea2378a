"""Console sessions: a random id in an HttpOnly cookie, the caller's Access kept in the worker's memory.

The cookie never holds the API token, nor anything derived from it: a session id is 256 random
bits, and the server maps it to the :class:`~taskzilla_sleep.access.Access` the token gave at login
(name, teams, role), its CSRF token and a one-shot notice. Sessions end at logout, after
``IDLE_S`` without a request, or when the worker restarts (people log in again).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from taskzilla_sleep.access import Access

COOKIE = "tz_console"
LOGIN_COOKIE = "tz_console_login"  # the login form's own CSRF value (no session yet)
IDLE_S = 8 * 3600
MAX_SESSIONS = 1000


@dataclass
class Session:
    id: str
    access: Access
    csrf: str
    last_seen: float
    notices: list[tuple[str, str]] = field(default_factory=list)  # (kind: ok|error, text), shown once

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())

    def notice(self, kind: str, text: str) -> None:
        self.notices = [*self.notices, (kind, text)][-5:]

    def take_notices(self) -> list[tuple[str, str]]:
        out, self.notices = self.notices, []
        return out


class Sessions:
    """Live sessions by id; thread-safe (routes run in the threadpool)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, idle_s: float = IDLE_S) -> None:
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._idle_s = idle_s

    def start(self, access: Access) -> Session:
        now = self._clock()
        s = Session(id=secrets.token_urlsafe(32), access=access, csrf=secrets.token_urlsafe(32), last_seen=now)
        with self._lock:
            self._expire(now)
            if len(self._by_id) >= MAX_SESSIONS:  # the least recently used makes room
                oldest = min(self._by_id.values(), key=lambda x: x.last_seen)
                del self._by_id[oldest.id]
            self._by_id[s.id] = s
        return s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = self._clock()
        with self._lock:
            s = self._by_id.get(sid)
            if s is None:
                return None
            if now - s.last_seen > self._idle_s:
                del self._by_id[sid]
                return None
            s.last_seen = now
            return s

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def __len__(self) -> int:
        return len(self._by_id)

    def _expire(self, now: float) -> None:
        for sid in [k for k, s in self._by_id.items() if now - s.last_seen > self._idle_s]:
            del self._by_id[sid]
