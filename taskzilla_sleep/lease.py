"""One lease lock in the graph store, shared by every replica of the worker.

A night and a watchdog distill never overlap, and two workers against one store run each night
once: whoever holds the lease works; the others wait. The holder renews it while working; a dead
holder's lease simply expires after ``worker.lease_ttl_s`` and the next replica takes over. Lease
times are wall-clock (they are about process liveness, not about the night being replayed).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

import structlog

from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.stores.cypher import CypherGraphStore

log = structlog.get_logger(__name__)

# The first SET takes the node's write lock (Neo4j), so the WHERE below reads the latest committed
# holder: two replicas cannot both see an expired lease and both take it. FalkorDB runs writes one
# at a time, so the same query is atomic there too.
Q_ACQUIRE = """
MERGE (l:Lease {name: $name})
SET l.touched_at = $now
WITH l
WHERE l.holder IS NULL OR l.holder = $me OR l.expires_at < $now
SET l.holder = $me, l.expires_at = $expires
RETURN l.holder AS holder
"""
Q_RELEASE = """
MATCH (l:Lease {name: $name})
WHERE l.holder = $me
SET l.holder = null, l.expires_at = 0
RETURN count(l) AS n
"""
Q_HOLDER = "MATCH (l:Lease {name: $name}) RETURN l.holder AS holder, l.expires_at AS expires_at"


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    def __init__(self, graph: CypherGraphStore, name: str, ttl_s: float, me: str | None = None) -> None:
        self._graph = graph
        self.name = name
        self.ttl_s = ttl_s
        self.me = me or holder_id()
        self._renewer: threading.Thread | None = None
        self._stop_renewing = threading.Event()

    def try_acquire(self) -> bool:
        now = int(time.time() * 1000)
        try:
            rows = self._graph.execute(
                Q_ACQUIRE, {"name": self.name, "me": self.me, "now": now, "expires": now + int(self.ttl_s * 1000)}
            )
        except StoreError as exc:
            # Two replicas creating the lease node at once: one loses on the uniqueness constraint.
            log.info("lease_contended", lease=self.name, error=str(exc)[:200])
            return False
        return bool(rows) and rows[0]["holder"] == self.me

    def release(self) -> None:
        self._stop_renewing.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
            self._renewer = None
        try:
            self._graph.execute(Q_RELEASE, {"name": self.name, "me": self.me})
        except StoreError as exc:
            log.warning("lease_release_failed", lease=self.name, error=str(exc)[:200])

    def holder(self) -> tuple[str | None, int]:
        rows = self._graph.query(Q_HOLDER, {"name": self.name})
        if not rows:
            return None, 0
        return rows[0]["holder"], int(rows[0]["expires_at"] or 0)

    def keep_alive(self) -> None:
        """Renew every ttl/3 in a background thread until release()."""
        self._stop_renewing.clear()

        def renew() -> None:
            while not self._stop_renewing.wait(self.ttl_s / 3):
                if not self.try_acquire():
                    log.error("lease_lost", lease=self.name, holder=self.me)
                    return

        self._renewer = threading.Thread(target=renew, name=f"lease-{self.name}", daemon=True)
        self._renewer.start()
