"""Backoff for a client that keeps failing to authenticate: per client address, in this process.

After ``FREE_FAILURES`` wrong credentials from one client (a bearer token matching no configured token
on ``/v1`` or ``/mcp``, a wrong token in the console's login form), each further failure makes that
client wait: 1 s, 2 s, 4 s ... up to ``MAX_WAIT_S``. While it waits, every request of that client that
needs a token is answered 429 with ``Retry-After``, without the token being looked at: a right guess
during the wait learns nothing. A success does not unlock a waiting client nor wipe its count (a
client holding one valid read token cannot reset its count between guesses at an admin token); a
client with no failure for ``FORGET_S`` is forgotten. Both are counted for ``/metrics``
(``taskzilla_sleep_auth_failures_total``, ``taskzilla_sleep_auth_throttled_total``).

Why in process memory, per replica, and not in the graph: the state is made of failures, which an
attacker sends at will; kept in the shared store, every unauthenticated request would cost it a
write. With N replicas a client gets at most N times the rate (one guess per ``MAX_WAIT_S`` per
replica once it waits, against tokens of 256 bits). The table is bounded (``MAX_CLIENTS``).

The client is the address the HTTP server reports. Behind a reverse proxy that is the proxy's,
unless uvicorn trusts the proxy for ``X-Forwarded-For`` (``FORWARDED_ALLOW_IPS``: 127.0.0.1 by
default): set it to the proxy's address, or everyone behind the proxy shares one backoff.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from starlette.requests import HTTPConnection

from taskzilla_sleep.core.errors import Busy
from taskzilla_sleep.core.instruments import Instruments

log = structlog.get_logger(__name__)

FREE_FAILURES = 5  # a person mistyping a token a few times waits for nothing
BASE_WAIT_S = 1.0
MAX_WAIT_S = 900.0
FORGET_S = 3600.0
MAX_CLIENTS = 10_000


def client_of(conn: HTTPConnection) -> str:
    """Whom a wrong token counts against: the peer's address (behind a proxy uvicorn trusts, per
    ``FORWARDED_ALLOW_IPS``, the address it forwards)."""
    return conn.client.host if conn.client else "unknown"


class Throttled(Busy):
    """A client that failed to authenticate too often must wait (API: 429 with Retry-After)."""


@dataclass
class _Client:
    failures: int = 0
    last_failure: float = 0.0
    wait_until: float = 0.0


class Throttle:
    """Failed authentications by client; ``check`` before looking at a credential, ``failed`` after a
    wrong one. Thread-safe (the API's operations run in a thread pool)."""

    def __init__(
        self,
        instruments: Instruments | None = None,
        *,
        free: int = FREE_FAILURES,
        base_s: float = BASE_WAIT_S,
        max_s: float = MAX_WAIT_S,
        forget_s: float = FORGET_S,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instruments = instruments
        self.free, self.base_s, self.max_s, self.forget_s = free, base_s, max_s, forget_s
        self.max_clients = max_clients
        self.clock = clock
        self._clients: OrderedDict[str, _Client] = OrderedDict()  # least recently failed first
        self._lock = threading.Lock()

    def check(self, client: str, surface: str) -> None:
        """Throttled (with the seconds to wait) while ``client`` must wait."""
        now = self.clock()
        with self._lock:
            c = self._clients.get(client)
            wait = c.wait_until - now if c is not None else 0.0
        if wait > 0:
            if self.instruments is not None:
                self.instruments.auth_throttled.labels(surface).inc()
            seconds = max(1, math.ceil(round(wait, 3)))  # 900.0000001 s of float noise is 900
            raise Throttled(
                f"too many failed authentications from this client: retry in {seconds} s", retry_after_s=seconds
            )

    def failed(self, client: str, surface: str) -> None:
        """One more wrong credential from ``client``: past the free ones, it waits (twice as long each time)."""
        now = self.clock()
        with self._lock:
            c = self._clients.pop(client, None)
            if c is None or now - c.last_failure > self.forget_s:
                c = _Client()
            c.failures += 1
            c.last_failure = now
            if c.failures > self.free:
                wait = min(self.max_s, self.base_s * 2 ** min(c.failures - self.free - 1, 30))
                c.wait_until = now + wait
            self._clients[client] = c  # now the most recently failed
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)
            failures, waiting = c.failures, max(0.0, c.wait_until - now)
        if self.instruments is not None:
            self.instruments.auth_failures.labels(surface).inc()
        log.warning("auth_failed", client=client, surface=surface, failures=failures, wait_s=round(waiting, 1))
