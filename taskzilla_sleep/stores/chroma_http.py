"""Connecting to a Chroma server: its address as chromadb's HttpClient takes it (https, headers,
tenant, database), a heartbeat under a timeout first, and the timeout chromadb's client has no
setting for (set in its httpx sessions)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import chromadb
import httpx
import structlog
from chromadb.api import ClientAPI
from chromadb.config import DEFAULT_DATABASE, DEFAULT_TENANT, Settings
from chromadb.errors import NotFoundError

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.stores.outage import Outage

log = structlog.get_logger("taskzilla_sleep.stores.chroma")


def set_http_timeout(client: ClientAPI, timeout_s: float) -> None:
    # chromadb's HTTP client builds its httpx session with timeout=None and has no setting for
    # it; without this a stalled server hangs every call. The attributes are private, so this
    # is best effort: if they move, calls still work, just without the timeout.
    sessions = http_sessions(client)
    if not sessions:
        log.warning("chroma_http_timeout_not_set", reason="chromadb internals changed")
    for session in sessions:
        # connect, read, write, pool: vector.timeout_s bounds every phase of every request (a
        # 1,000-vector upsert takes well under a second here; raise the setting for a slow link).
        session.timeout = httpx.Timeout(timeout_s)


def http_sessions(client: object) -> list[Any]:
    """The httpx sessions inside a chromadb HTTP client: its own and its internal admin
    client's (private attributes; an empty list if they aren't there)."""
    owners = (client, getattr(client, "_admin_client", None))
    sessions = (getattr(getattr(owner, "_server", None), "_session", None) for owner in owners)
    return [session for session in sessions if session is not None]


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int
    ssl: bool = False
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may carry the token: never shown
    tenant: str = DEFAULT_TENANT
    database: str = DEFAULT_DATABASE

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"

    @property
    def where(self) -> str:
        """The URL, and the tenant and database when they are not Chroma's defaults."""
        if (self.tenant, self.database) == (DEFAULT_TENANT, DEFAULT_DATABASE):
            return self.url
        return f"{self.url} {self.tenant}/{self.database}"


def connect_server(a: ServerAddress, timeout_s: float, outage: Outage, why: Callable[[Any], str]) -> ClientAPI:
    """chromadb's HttpClient for ``a``; the outage's error when nothing answers, a StoreError naming
    the setting when the tenant or database does not exist."""
    # HttpClient's constructor makes requests with no timeout at all; a heartbeat with one first
    # turns "nothing answers" into a quick error instead of a hang.
    try:
        beat = urllib.request.Request(f"{a.url}/api/v2/heartbeat", headers=a.headers)
        with urllib.request.urlopen(beat, timeout=timeout_s) as response:
            response.read()
    except (OSError, ValueError) as exc:
        cause = why(exc.reason if isinstance(exc, urllib.error.URLError) else exc)
        raise outage.down(f"chroma-server unreachable at {a.url}: {cause} (GET /api/v2/heartbeat)") from exc
    try:
        client = chromadb.HttpClient(
            host=a.host,
            port=a.port,
            ssl=a.ssl,
            headers=a.headers or None,
            settings=Settings(anonymized_telemetry=False),
            tenant=a.tenant,
            database=a.database,
        )
    except NotFoundError as exc:
        # chromadb checks the tenant, then the database: say which setting names what is missing.
        what, name = ("tenant", a.tenant) if str(exc).startswith("Tenant") else ("database", a.database)
        raise StoreError(
            f"chroma-server at {a.url} has no {what} {name!r} (vector.{what}): create it on the server "
            f"first (chromadb AdminClient: create_{what}), or correct vector.{what}"
        ) from None
    set_http_timeout(client, timeout_s)
    return client
