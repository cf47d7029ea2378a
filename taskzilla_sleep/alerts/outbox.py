"""The durable outbox: one ``Alert`` node per item and channel in the graph, never deleted.

Queueing is a sync over the graph, not a side effect of opening a contradiction:
``sync_contradictions`` finds every OPEN contradiction and MERGEs one alert per enabled channel,
keyed ``{contradiction_id}:{channel}``, so a crash between the two loses nothing (the next sync
finds it) and the same alert is never queued twice. The message is built once, here, and stored
with the alert (``payload_json``): every retry, on any replica, after any restart, sends the same
content with the same idempotency key. A claim pushes ``next_attempt_at`` out by a lease, so two
replicas never post the same alert at the same time.

The Cypher lives in this module for now and runs through the graph store's ``query()`` and
``execute()``.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict

from taskzilla_sleep.alerts.message import (
    EXAMPLES_PER_BELIEF,
    AlertKind,
    AlertMessage,
    format_contradiction,
    format_summary,
)
from taskzilla_sleep.alerts.senders import ERROR_MAX
from taskzilla_sleep.errors import StoreError
from taskzilla_sleep.models import Contradiction, Episode, EpisodeStatus, Pattern, from_ms, to_ms
from taskzilla_sleep.settings import AlertChannel
from taskzilla_sleep.stores.cycle_queries import UNREADABLE, contradiction_from_props, why_unreadable
from taskzilla_sleep.stores.cypher import CypherGraphStore, Row, chunks

log = structlog.get_logger(__name__)

AlertStatus = Literal["pending", "delivered", "failed"]

CLAIM_RACES = 8  # claims lost to another replica before a channel gives up its round

Q_OPEN_CONTRADICTIONS = """
MATCH (c:Contradiction)
WHERE c.status = 'open'
OPTIONAL MATCH (a:Alert)-[:ALERT_FOR]->(c)
RETURN properties(c) AS c, collect(a.channel) AS channels
"""

Q_QUEUE_CONTRADICTION_ALERTS = """
UNWIND $rows AS r
MATCH (c:Contradiction {id: r.contradiction_id})
MERGE (a:Alert {key: r.key})
ON CREATE SET a += r.props
MERGE (a)-[:ALERT_FOR]->(c)
"""

Q_QUEUE_ALERTS = """
UNWIND $rows AS r
MERGE (a:Alert {key: r.key})
ON CREATE SET a += r.props
"""

Q_DUE = """
MATCH (a:Alert)
WHERE a.status = 'pending' AND a.next_attempt_at <= $now
WITH a ORDER BY a.next_attempt_at, a.key LIMIT $limit
RETURN properties(a) AS p
"""

# Lost-update guard (Neo4j's documented pattern): SET a dummy property to take the node's write
# lock, THEN re-read the condition; FalkorDB runs each query atomically anyway. A claim pushes
# next_attempt_at out by a lease so no other replica picks the alert up while it is in flight.
Q_CLAIM = """
MATCH (a:Alert)
WHERE a.status = 'pending' AND a.channel = $channel AND a.next_attempt_at <= $now
WITH a ORDER BY a.next_attempt_at, a.key LIMIT 1
SET a._lock = true
WITH a, (a.status = 'pending' AND a.next_attempt_at <= $now) AS free
SET a._lock = null,
    a.next_attempt_at = CASE WHEN free THEN $until ELSE a.next_attempt_at END,
    a.claimed_at = CASE WHEN free THEN $now ELSE a.claimed_at END
RETURN properties(a) AS p, free
"""

Q_MARK_DELIVERED = """
MATCH (a:Alert {key: $key})
SET a._lock = true
WITH a, a.status <> 'delivered' AS todo
SET a._lock = null
WITH a, todo WHERE todo
SET a.status = 'delivered', a.delivered_at = $now, a.last_attempt_at = $now,
    a.attempts = coalesce(a.attempts, 0) + 1, a.last_error = null
RETURN a.attempts AS attempts
"""

Q_MARK_FAILED = """
MATCH (a:Alert {key: $key})
SET a._lock = true
WITH a, a.status = 'pending' AS todo
SET a._lock = null
WITH a, todo WHERE todo
SET a.attempts = coalesce(a.attempts, 0) + 1, a.last_attempt_at = $now, a.last_error = $error,
    a.next_attempt_at = $next_at, a.status = CASE WHEN $give_up THEN 'failed' ELSE 'pending' END
RETURN a.attempts AS attempts
"""

# A channel that is down is down for all its alerts: the others wait as long as the one that failed.
Q_DEFER_CHANNEL = """
MATCH (a:Alert)
WHERE a.status = 'pending' AND a.channel = $channel AND a.next_attempt_at < $until
SET a.next_attempt_at = $until
RETURN count(a) AS n
"""

# After the config is fixed, a person sends failed alerts again: a fresh attempt budget, same key.
Q_REQUEUE_FAILED = """
MATCH (a:Alert)
WHERE a.status = 'failed' AND ($keys IS NULL OR a.key IN $keys)
SET a.status = 'pending', a.attempts = 0, a.next_attempt_at = $now
RETURN count(a) AS n
"""

Q_PENDING_COUNT = "MATCH (a:Alert) WHERE a.status = 'pending' RETURN count(a) AS n"
Q_LIST = "MATCH (a:Alert) WHERE $status IS NULL OR a.status = $status RETURN properties(a) AS p"


class Alert(BaseModel):
    """One queued message for one channel, as stored in the outbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str  # the idempotency key: "{contradiction_id}:{channel}" / "{summary_key}:{channel}"
    channel: str
    channel_kind: str
    kind: AlertKind
    team: str | None = None
    contradiction_id: str | None = None
    message: AlertMessage
    status: AlertStatus
    attempts: int = 0
    next_attempt_at: datetime
    last_error: str | None = None
    created_at: datetime
    last_attempt_at: datetime | None = None
    delivered_at: datetime | None = None

    @classmethod
    def from_props(cls, p: Row) -> Alert:
        def t(k: str) -> datetime | None:
            return from_ms(int(p[k])) if p.get(k) is not None else None

        return cls(
            key=p["key"],
            channel=p["channel"],
            channel_kind=p.get("channel_kind", "?"),
            kind=p["kind"],
            team=p.get("team"),
            contradiction_id=p.get("contradiction_id"),
            message=AlertMessage.model_validate_json(p["payload_json"]),
            status=p["status"],
            attempts=int(p.get("attempts") or 0),
            next_attempt_at=from_ms(int(p["next_attempt_at"])),
            last_error=p.get("last_error"),
            created_at=from_ms(int(p["created_at"])),
            last_attempt_at=t("last_attempt_at"),
            delivered_at=t("delivered_at"),
        )


ExamplesFor = Callable[[Pattern], Sequence[Episode]]


class Outbox:
    """Alert nodes in the graph store: queued idempotently, claimed, marked. Never deleted.

    Does no work when constructed. Its key and status indexes are part of the graph's own schema
    (``("Alert", "key")`` and ``("Alert", "status")`` in stores/cypher.py KEYS and INDEXES), made by
    the graph store's ``ensure_schema()``. The graph is not owned: whoever built it closes it. Safe
    to share between the threads of ``deliver_due``.
    """

    def __init__(self, graph: CypherGraphStore) -> None:
        self._graph = graph
        self._mutex = threading.Lock()  # one graph call at a time from this outbox's threads
        self._closed = False

    def _query(self, q: str, params: Row | None = None) -> builtins.list[Row]:
        with self._mutex:
            self._check_open()
            return self._graph.query(q, params)

    def _execute(self, q: str, params: Row | None = None) -> builtins.list[Row]:
        with self._mutex:
            self._check_open()
            return self._graph.execute(q, params)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("alert outbox is closed")

    def close(self) -> None:
        self._closed = True

    def evidence_examples(self, pattern: Pattern) -> builtins.list[Episode]:
        """Two recent supporting episodes that still have their text, from different authors if possible."""
        eps = [
            e
            for e in self._graph.get_episodes(pattern.evidence_ids)
            if e.text.strip() and e.status not in (EpisodeStatus.RETIRED, EpisodeStatus.PRUNED)
        ]
        eps.sort(key=lambda e: (e.ts, e.id), reverse=True)
        picked: builtins.list[Episode] = []
        for e in eps:
            if len(picked) < EXAMPLES_PER_BELIEF and all(p.author != e.author for p in picked):
                picked.append(e)
        picked += [e for e in eps if e not in picked][: EXAMPLES_PER_BELIEF - len(picked)]
        return sorted(picked, key=lambda e: (e.ts, e.id))

    def sync_contradictions(
        self,
        channels: Mapping[str, AlertChannel],
        now: datetime,
        examples_for: ExamplesFor | None = None,
        *,
        tz: tzinfo = UTC,
    ) -> int:
        """Queue an alert per enabled channel for every OPEN contradiction that lacks one.

        Idempotent (MERGE on the key): running it twice, or on two replicas, queues nothing twice.
        Returns how many alerts were queued.
        """
        enabled = sorted(n for n, ch in channels.items() if ch.enabled)
        if not enabled:
            return 0
        todo: builtins.list[tuple[Contradiction, builtins.list[str]]] = []
        for r in self._query(Q_OPEN_CONTRADICTIONS):
            have = set(r["channels"] or [])
            missing = [n for n in enabled if n not in have]
            if missing:
                try:
                    todo.append((contradiction_from_props(r["c"]), missing))
                except UNREADABLE as exc:  # the night quarantines it; one bad node must not stop the outbox
                    log.warning("alert_not_queued", reason=why_unreadable(exc), contradiction_id=r["c"].get("id"))
        if not todo:
            return 0
        with self._mutex:
            ids = sorted({i for c, _ in todo for i in (c.old_pattern_id, c.new_pattern_id)})
            patterns = {p.id: p for p in self._graph.patterns_by_id(ids)}
        examples = examples_for or self.evidence_examples
        rows: builtins.list[Row] = []
        for c, missing in sorted(todo, key=lambda x: (x[0].opened_at, x[0].id)):
            old, new = patterns.get(c.old_pattern_id), patterns.get(c.new_pattern_id)
            if old is None or new is None:
                log.warning("alert_not_queued", reason="belief_missing", contradiction_id=c.id)
                continue
            payload = format_contradiction(c, old, new, examples(old), examples(new), tz=tz).model_dump_json()
            for name in missing:
                props = _new_alert(name, channels[name].kind, "contradiction", c.team, payload, now)
                props["contradiction_id"] = c.id
                rows.append({"key": alert_key(c.id, name), "contradiction_id": c.id, "props": props})
        for part in chunks(rows, 200):
            self._execute(Q_QUEUE_CONTRADICTION_ALERTS, {"rows": list(part)})
        if rows:
            log.info("alerts_queued", kind="contradiction", alerts=len(rows), contradictions=len(todo))
        return len(rows)

    def enqueue_summary(self, key: str, text: str, channels: Mapping[str, AlertChannel], now: datetime) -> int:
        """Queue a summary (key e.g. ``summary_2026-11-28``) once per enabled channel; MERGE, so idempotent."""
        payload = format_summary(text, key=key).model_dump_json()
        rows = [
            {"key": alert_key(key, n), "props": _new_alert(n, ch.kind, "summary", None, payload, now)}
            for n, ch in sorted(channels.items())
            if ch.enabled
        ]
        if rows:
            self._execute(Q_QUEUE_ALERTS, {"rows": rows})
            log.info("alerts_queued", kind="summary", alerts=len(rows))
        return len(rows)

    def due(self, now: datetime, limit: int = 100) -> builtins.list[Alert]:
        """Pending alerts whose next attempt is due (read only; ``claim`` is what delivery uses)."""
        return [Alert.from_props(r["p"]) for r in self._query(Q_DUE, {"now": to_ms(now), "limit": limit})]

    def claim(self, channel: str, now: datetime, lease: timedelta) -> Alert | None:
        """Take the next due alert of ``channel`` for one attempt: it is not due again for ``lease``."""
        params = {"channel": channel, "now": to_ms(now), "until": to_ms(now + lease)}
        for _ in range(CLAIM_RACES):
            rows = self._execute(Q_CLAIM, params)
            if not rows:
                return None  # nothing due
            if rows[0]["free"]:
                return Alert.from_props(rows[0]["p"])
            # Another replica claimed the same alert between our match and our lock: take the next.
        return None

    def mark_delivered(self, key: str, now: datetime) -> bool:
        """False if it was already delivered (another replica, or a repeat after a crash)."""
        return bool(self._execute(Q_MARK_DELIVERED, {"key": key, "now": to_ms(now)}))

    def mark_failed_attempt(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        """Count a failed attempt; ``give_up`` makes it ``failed`` (kept and listed). Only pending alerts change."""
        params = {
            "key": key,
            "now": to_ms(now),
            "error": " ".join(error.split())[:ERROR_MAX],
            "next_at": to_ms(next_at),
            "give_up": give_up,
        }
        return bool(self._execute(Q_MARK_FAILED, params))

    def defer_channel(self, channel: str, until: datetime) -> int:
        """Push every pending alert of ``channel`` due before ``until`` to ``until`` (no attempt counted)."""
        rows = self._execute(Q_DEFER_CHANNEL, {"channel": channel, "until": to_ms(until)})
        return int(rows[0]["n"]) if rows else 0

    def requeue_failed(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        """Make failed alerts (all, or those ``keys``) pending again with a fresh attempt budget."""
        rows = self._execute(Q_REQUEUE_FAILED, {"now": to_ms(now), "keys": list(keys) if keys is not None else None})
        n = int(rows[0]["n"]) if rows else 0
        if n:
            log.info("alerts_requeued", alerts=n)
        return n

    def pending_count(self) -> int:
        return int(self._query(Q_PENDING_COUNT)[0]["n"])

    def list(self, status: AlertStatus | None = None) -> builtins.list[Alert]:
        """Every alert (or those with ``status``), oldest first: failed ones stay here for people to see."""
        alerts = [Alert.from_props(r["p"]) for r in self._query(Q_LIST, {"status": status})]
        return sorted(alerts, key=lambda a: (a.created_at, a.key))


def alert_key(item_id: str, channel: str) -> str:
    """The idempotency key: one alert per item and channel, ever."""
    return f"{item_id}:{channel}"


def _new_alert(channel: str, channel_kind: str, kind: AlertKind, team: str | None, payload: str, now: datetime) -> Row:
    props: Row = {
        "channel": channel,
        "channel_kind": channel_kind,
        "kind": kind,
        "payload_json": payload,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": to_ms(now),
        "created_at": to_ms(now),
    }
    if team is not None:
        props["team"] = team
    return props
