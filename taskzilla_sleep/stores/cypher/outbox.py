"""The durable alert outbox in the graph: alerts queued idempotently by key, claimed, marked. Never deleted.

Claims and marks take the alert node's write lock first (``SET a._lock``: Neo4j's documented
lost-update guard) and only then re-read the condition, so two replicas never both claim one alert;
FalkorDB runs each query atomically anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.core.models import Contradiction, from_ms, to_ms
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import alert_from_props, alert_props, contradiction_from_props
from taskzilla_sleep.stores.cypher.base import CypherBase, chunks
from taskzilla_sleep.stores.ports import AlertRecord, AlertStatus

Q = queries.load("outbox")
CLAIM_RACES = 8  # claims lost to another replica before a channel gives up its round


class CypherOutbox(CypherBase):
    def queue_alerts(self, alerts: Sequence[AlertRecord]) -> None:
        linked = [
            {"key": a.key, "contradiction_id": a.contradiction_id, "props": alert_props(a)}
            for a in alerts
            if a.contradiction_id is not None
        ]
        free = [{"key": a.key, "props": alert_props(a)} for a in alerts if a.contradiction_id is None]
        for part in chunks(linked, 200):
            self._write(Q["queue_contradiction_alerts"], {"rows": part})
        for part in chunks(free, 200):
            self._write(Q["queue_alerts"], {"rows": part})

    def withdraw_alerts(self, keys: Sequence[str], suffix: str, reason: str) -> None:
        for part in chunks(list(keys), 200):
            self._write(Q["withdraw_alerts"], {"keys": part, "suffix": suffix, "reason": reason})

    def alerted_open_contradictions(self) -> list[tuple[Contradiction, frozenset[str]]]:
        rows = self._read(Q["alerted_open_contradictions"])
        channels = {str(r["c"].get("id")): frozenset(r["channels"] or ()) for r in rows}
        found = self._models("contradiction", (r["c"] for r in rows), contradiction_from_props)
        return [(c, channels[c.id]) for c in sorted(found, key=lambda c: (c.opened_at, c.id))]

    def claim_alert(self, channel: str, now: datetime, until: datetime) -> AlertRecord | None:
        params = {"channel": channel, "now": to_ms(now), "until": to_ms(until)}
        for _ in range(CLAIM_RACES):
            rows = self._write(Q["claim_alert"], params)
            if not rows:
                return None  # nothing due
            if rows[0]["free"]:
                return alert_from_props(rows[0]["p"])
            # Another replica claimed the same alert between our match and our lock: take the next.
        return None

    def mark_alert_delivered(self, key: str, now: datetime, message_ref: str | None = None) -> bool:
        params = {"key": key, "now": to_ms(now), "ref": message_ref}
        return bool(self._write(Q["mark_alert_delivered"], params))

    def mark_alert_dropped(self, key: str, reason: str) -> bool:
        return bool(self._write(Q["mark_alert_dropped"], {"key": key, "reason": reason}))

    def mark_alert_failed(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        params = {"key": key, "now": to_ms(now), "error": error, "next_at": to_ms(next_at), "give_up": give_up}
        return bool(self._write(Q["mark_alert_failed"], params))

    def defer_alerts(self, channel: str, until: datetime) -> int:
        rows = self._write(Q["defer_alerts"], {"channel": channel, "until": to_ms(until)})
        return int(rows[0]["n"]) if rows else 0

    def requeue_failed_alerts(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        params = {"now": to_ms(now), "keys": list(keys) if keys is not None else None}
        rows = self._write(Q["requeue_failed_alerts"], params)
        return int(rows[0]["n"]) if rows else 0

    def alerts(self, status: AlertStatus | None = None) -> list[AlertRecord]:
        found = [alert_from_props(r["p"]) for r in self._read(Q["alerts"], {"status": status})]
        return sorted(found, key=lambda a: (a.created_at, a.key))

    def count_alerts(self, status: AlertStatus) -> int:
        return int(self._read(Q["count_alerts"], {"status": status})[0]["n"])

    def oldest_alert_at(self, status: AlertStatus) -> datetime | None:
        rows = self._read(Q["oldest_alert_at"], {"status": status})
        t = rows[0]["t"] if rows else None
        return from_ms(int(t)) if t is not None else None
