"""The lease lock in the graph (the lease's rules — renewal, a dead local holder — are in ``lease.py``)."""

from __future__ import annotations

from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.ports import LeaseClaim, LeaseState

Q = queries.load("lease")


class CypherLease(CypherBase):
    def try_lease(self, name: str, claim: LeaseClaim, now_ms: int, ttl_ms: int, dead_holder: str | None) -> bool:
        params = {
            "name": name,
            "me": claim.holder,
            "now": now_ms,
            "expires": now_ms + ttl_ms,
            "dead": dead_holder,
            "host": claim.host,
            "pid_ns": claim.pid_ns,
            "pid": claim.pid,
        }
        rows = self._write(Q["acquire_lease"], params)
        return bool(rows) and rows[0]["holder"] == claim.holder

    def release_lease(self, name: str, holder: str) -> None:
        self._write(Q["release_lease"], {"name": name, "me": holder})

    def lease_state(self, name: str) -> LeaseState | None:
        rows = self._read(Q["lease_holder"], {"name": name})
        if not rows:
            return None
        r = rows[0]
        pid = r["pid"]
        return LeaseState(
            holder=r["holder"],
            expires_at_ms=int(r["expires_at"] or 0),
            host=r["host"],
            pid_ns=r["pid_ns"],
            pid=pid if isinstance(pid, int) else None,
        )
