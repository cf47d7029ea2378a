"""chromadb's HTTP client has no timeout setting: reaching into its httpx sessions to set one."""

from __future__ import annotations

from typing import Any

import httpx
import structlog
from chromadb.api import ClientAPI

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
