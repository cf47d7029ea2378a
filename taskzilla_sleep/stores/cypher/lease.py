"""The lease lock in the graph (the lease's rules — renewal, a dead local holder — are in ``lease.py``),
and the marks of ingests in flight (their rules are in ``inflight.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from taskzilla_sleep.core.models import EPISODE_LIVE
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import IngestMark, LeaseClaim, LeaseState
from taskzilla_sleep.stores.records import MARK_KEPT_MS

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

    # -- ingests in flight -----------------------------------------------------------------------
    def mark_ingest(self, mark: IngestMark) -> None:
        props = {
            "holder": mark.holder,
            "host": mark.host,
            "pid_ns": mark.pid_ns,
            "pid": mark.pid,
            "teams": list(mark.teams),
            "started_at": mark.started_at_ms,
            "expires_at": mark.expires_at_ms,
            "ended": mark.ended,
        }
        self._write(Q["mark_ingest"], {"id": mark.id, "props": props})
        if mark.ended:  # a separate write: never a delete inside the write that marks (FalkorDB, cypher/episodes.py)
            before = int(time.time() * 1000) - MARK_KEPT_MS
            while int(self._write(Q["drop_old_ingest_marks"], {"before": before})[0]["n"]) > 0:
                pass

    def ingest_marks(self, since_ms: int) -> list[IngestMark]:
        return sorted((_mark(r["m"]) for r in self._read(Q["ingest_marks"], {"since": since_ms})), key=lambda m: m.id)

    def ingest_episodes(self, team: str, ingests: Sequence[str]) -> set[str]:
        if not ingests:
            return set()
        live = sorted(s.value for s in EPISODE_LIVE)
        rows = self._read(Q["ingest_episodes"], {"team": team, "ingests": list(ingests), "live": live})
        return {i for r in rows for i in r["ids"] or []}


def _mark(p: Row) -> IngestMark:
    pid = p.get("pid")
    return IngestMark(
        id=str(p["id"]),
        holder=str(p.get("holder") or ""),
        host=str(p.get("host") or ""),
        pid_ns=p.get("pid_ns"),
        pid=pid if isinstance(pid, int) else 0,
        teams=tuple(str(t) for t in p.get("teams") or ()),
        started_at_ms=int(p.get("started_at") or 0),
        expires_at_ms=int(p.get("expires_at") or 0),
        ended=bool(p.get("ended")),
    )
