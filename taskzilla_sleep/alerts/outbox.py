"""The durable outbox: one alert per item and channel in the graph store, never deleted.

Queueing is a sync over the graph, not a side effect of opening a contradiction:
``sync_contradictions`` finds every OPEN contradiction and queues one alert per enabled channel
whose ``teams`` include the contradiction's team, keyed ``{contradiction_id}:{channel}``, so a
crash between the two loses nothing (the next sync finds it) and the same alert is never queued
twice. The message is built once, here, and stored with the alert (``payload_json``): every retry,
on any replica, after any restart, sends the same content with the same idempotency key. A claim
pushes ``next_attempt_at`` out by a lease, so two replicas never post the same alert at the same
time. The storage itself is the graph store's (``stores/ports.py``, OutboxStore).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, tzinfo

import structlog

from taskzilla_sleep.alerts.actions import digest
from taskzilla_sleep.alerts.message import (
    EXAMPLES_PER_BELIEF,
    AlertMessage,
    console_link,
    format_contradiction,
    format_resolution,
    format_summary,
)
from taskzilla_sleep.alerts.senders import ERROR_MAX
from taskzilla_sleep.core.errors import NotFound, StoreError
from taskzilla_sleep.core.models import Contradiction, ContradictionStatus, Episode, EpisodeStatus, Pattern
from taskzilla_sleep.core.settings import AlertChannel
from taskzilla_sleep.stores.ports import AlertKind, AlertRecord, AlertStatus, GraphStore

log = structlog.get_logger(__name__)


class Alert(AlertRecord):
    """One queued message for one channel, as the outbox holds it, with its message read back."""

    @property
    def message(self) -> AlertMessage:
        return AlertMessage.model_validate_json(self.payload_json)

    @classmethod
    def of(cls, r: AlertRecord) -> Alert:
        return cls.model_validate(r.model_dump())


ExamplesFor = Callable[[Pattern], Sequence[Episode]]


class Outbox:
    """The alerts in the graph store: queued idempotently, claimed, marked. Never deleted.

    The graph is not owned: whoever built it closes it. Safe to share between the threads of
    ``deliver_due`` (one graph call at a time from them).
    """

    def __init__(self, graph: GraphStore) -> None:
        self._graph = graph
        self._mutex = threading.Lock()
        self._closed = False

    @contextmanager
    def _store(self) -> Iterator[GraphStore]:
        with self._mutex:
            if self._closed:
                raise StoreError("alert outbox is closed")
            yield self._graph

    def close(self) -> None:
        self._closed = True

    def evidence_examples(self, pattern: Pattern) -> builtins.list[Episode]:
        """Two recent supporting episodes that still have their text, from different authors if possible."""
        with self._store() as g:
            found = g.get_episodes(pattern.evidence_ids)
        eps = [e for e in found if e.text.strip() and e.status not in (EpisodeStatus.RETIRED, EpisodeStatus.PRUNED)]
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
        public_url: str | None = None,
    ) -> int:
        """Queue an alert per enabled channel routing its team (``teams``) for every OPEN contradiction that lacks one.

        Idempotent (the key is unique): running it twice, or on two replicas, queues nothing twice.
        Returns how many alerts were queued.
        """
        enabled = sorted(n for n, ch in channels.items() if ch.enabled)
        if not enabled:
            return 0
        with self._store() as g:
            alerted = g.alerted_open_contradictions()
        todo = [(c, [n for n in enabled if n not in have and channels[n].routes(c.team)]) for c, have in alerted]
        todo = [(c, missing) for c, missing in todo if missing]
        if not todo:
            return 0
        with self._store() as g:
            patterns = {p.id: p for p in g.patterns_by_id(sorted({i for c, _ in todo for i in c.pattern_ids}))}
        examples = examples_for or self.evidence_examples
        records: builtins.list[AlertRecord] = []
        for c, missing in todo:
            old, new = patterns.get(c.old_pattern_id), patterns.get(c.new_pattern_id)
            if old is None or new is None:
                log.warning("alert_not_queued", reason="belief_missing", contradiction_id=c.id)
                continue
            link = console_link(public_url, c.id)
            msg = format_contradiction(c, old, new, examples(old), examples(new), tz=tz, console_url=link)
            payload = msg.model_dump_json()
            records += [
                _new_alert(c.id, name, channels[name].kind, "contradiction", c.team, payload, now, c.id)
                for name in missing
            ]
        with self._store() as g:
            g.queue_alerts(records)
        if records:
            log.info("alerts_queued", kind="contradiction", alerts=len(records), contradictions=len(todo))
        return len(records)

    def answer_resolution(self, c: Contradiction, now: datetime) -> int:
        """Queue the answer to every delivered alert of the resolved ``c``: one per channel, keyed
        ``{id}.resolution:{channel}``, so repeating a resolution queues nothing twice. An alert not
        delivered yet needs no answer: delivery drops it as obsolete. Returns how many were queued."""
        if c.status is not ContradictionStatus.RESOLVED:
            return 0
        with self._store() as g:
            # An alert an undo withdrew belongs to an earlier life of the contradiction: not answered.
            mine = [a for a in g.alerts() if a.contradiction_id == c.id and not withdrawn(a)]
            beliefs = g.patterns_by_id([c.old_pattern_id, c.new_pattern_id])  # as the decision left them
        item = f"{c.id}.resolution"
        have = {a.key for a in mine if a.kind == "resolution"}
        sent = [a for a in mine if a.kind == "contradiction" and a.status == "delivered"]
        records: builtins.list[AlertRecord] = []
        for a in (a for a in sent if alert_key(item, a.channel) not in have):
            try:
                link = Alert.of(a).message.console_url
            except ValueError:  # a payload this version cannot read: answer without the link
                link = None
            payload = format_resolution(c, beliefs, reply_to=a.message_ref, console_url=link).model_dump_json()
            records.append(_new_alert(item, a.channel, a.channel_kind, "resolution", c.team, payload, now, c.id))
        if records:
            with self._store() as g:
                g.queue_alerts(records)
            log.info("alerts_queued", kind="resolution", alerts=len(records), contradiction_id=c.id)
        return len(records)

    def alerted_contradiction(self, channel: str, ref: str) -> str | None:
        """The id of the contradiction ``channel`` was alerted about whose digest is ``ref`` (a
        Telegram button too small for a long id carries its digest), or None."""
        for a in self.list():
            cid = a.contradiction_id
            if (
                a.channel == channel
                and a.kind == "contradiction"
                and cid is not None
                and not withdrawn(a)
                and digest(cid) == ref
            ):
                return cid
        return None

    def enqueue_summary(self, key: str, text: str, channels: Mapping[str, AlertChannel], now: datetime) -> int:
        """Queue a summary (key e.g. ``summary_2026-11-28``) once per enabled channel; idempotent.

        The summary covers every team of the night, so only channels of every team (``teams: ["*"]``)
        get it: a channel routed to some teams never sees another team's news.
        """
        payload = format_summary(text, key=key).model_dump_json()
        records = [
            _new_alert(key, n, ch.kind, "summary", None, payload, now)
            for n, ch in sorted(channels.items())
            if ch.enabled and ch.routes(None)
        ]
        if records:
            with self._store() as g:
                g.queue_alerts(records)
            log.info("alerts_queued", kind="summary", alerts=len(records))
        return len(records)

    def due(self, now: datetime, limit: int = 100) -> builtins.list[Alert]:
        """Pending alerts whose next attempt is due (read only; ``claim`` is what delivery uses)."""
        pending = [a for a in self.list("pending") if a.next_attempt_at <= now]
        return sorted(pending, key=lambda a: (a.next_attempt_at, a.key))[:limit]

    def claim(self, channel: str, now: datetime, lease: timedelta) -> Alert | None:
        """Take the next due alert of ``channel`` for one attempt: it is not due again for ``lease``."""
        with self._store() as g:
            record = g.claim_alert(channel, now, now + lease)
        return Alert.of(record) if record is not None else None

    def mark_delivered(self, key: str, now: datetime, message_ref: str | None = None) -> bool:
        """False if it was already delivered (another replica, or a repeat after a crash)."""
        with self._store() as g:
            return g.mark_alert_delivered(key, now, message_ref)

    def obsolete_reason(self, alert: Alert) -> str | None:
        """Why ``alert`` must not be sent any more (its contradiction is no longer open), or None."""
        if alert.kind != "contradiction" or alert.contradiction_id is None:
            return None
        cid = alert.contradiction_id
        try:
            with self._store() as g:
                c = g.get_contradiction(cid)
        except NotFound:
            return f"contradiction {cid} no longer exists"
        if c.status is ContradictionStatus.OPEN:
            return None
        by = f" by {c.resolved_by}" if c.resolved_by else ""
        at = f" at {c.resolved_at.isoformat()}" if c.resolved_at else ""
        return f"contradiction {cid} was {c.status.value}{by}{at}, before the alert was sent"

    def mark_dropped(self, key: str, reason: str) -> bool:
        """A pending alert is never sent: ``dropped``, with ``reason`` (kept and listed)."""
        with self._store() as g:
            return g.mark_alert_dropped(key, " ".join(reason.split())[:ERROR_MAX])

    def mark_failed_attempt(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        """Count a failed attempt; ``give_up`` makes it ``failed`` (kept and listed). Only pending alerts change."""
        with self._store() as g:
            return g.mark_alert_failed(key, now, " ".join(error.split())[:ERROR_MAX], next_at, give_up)

    def defer_channel(self, channel: str, until: datetime) -> int:
        """Push every pending alert of ``channel`` due before ``until`` to ``until`` (no attempt counted)."""
        with self._store() as g:
            return g.defer_alerts(channel, until)

    def requeue_failed(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        """Make failed alerts (all, or those ``keys``) pending again with a fresh attempt budget."""
        with self._store() as g:
            n = g.requeue_failed_alerts(now, keys)
        if n:
            log.info("alerts_requeued", alerts=n)
        return n

    def pending_count(self) -> int:
        with self._store() as g:
            return g.count_alerts("pending")

    def failed_count(self) -> int:
        with self._store() as g:
            return g.count_alerts("failed")

    def list(self, status: AlertStatus | None = None) -> builtins.list[Alert]:
        """Every alert (or those with ``status``), oldest first: failed ones stay here for people to see."""
        with self._store() as g:
            return [Alert.of(r) for r in g.alerts(status)]


WITHDRAWN = "~undone:"  # in the key of an alert whose contradiction an undo took back (archive/undo.py)


def withdrawn(a: AlertRecord) -> bool:
    """An alert of a contradiction an undo took back (re-keyed, so the contradiction may be alerted again)."""
    return WITHDRAWN in a.key


def alert_key(item_id: str, channel: str) -> str:
    """The idempotency key: one alert per item and channel, ever."""
    return f"{item_id}:{channel}"


def _new_alert(
    item_id: str,
    channel: str,
    channel_kind: str,
    kind: AlertKind,
    team: str | None,
    payload: str,
    now: datetime,
    contradiction_id: str | None = None,
) -> AlertRecord:
    return AlertRecord(
        key=alert_key(item_id, channel),
        channel=channel,
        channel_kind=channel_kind,
        kind=kind,
        team=team,
        contradiction_id=contradiction_id,
        payload_json=payload,
        next_attempt_at=now,
        created_at=now,
    )
