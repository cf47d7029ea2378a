"""What an operator does with the outbox: list alerts (failed ones above all) and requeue them.

Shared by the command line (``cli_alerts``) and the admin API (``GET /v1/alerts``, ``POST
/v1/alerts/{id}/requeue``). Every call takes the caller's :class:`~taskzilla_sleep.rules.access.Access`:
an admin sees and requeues the alerts of its teams only; an alert of no team (the nightly summary)
belongs to admins of every team. Requeue changes nothing but the failed alerts it names (pending
again, due now, attempts 0, no last error): requeueing twice, or an alert that is not failed, is a
no-op.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from taskzilla_sleep.alerts.outbox import Alert, Outbox
from taskzilla_sleep.core.errors import NotFound
from taskzilla_sleep.core.models import Time
from taskzilla_sleep.rules.access import Access
from taskzilla_sleep.stores.ports import AlertKind, AlertStatus, GraphStore

# What a person may ask for: the stored statuses, and "sent" for delivered.
StatusFilter = Literal["pending", "sent", "delivered", "failed", "dropped"]


class AlertView(BaseModel):
    """One alert as an operator sees it: where it goes, what it is about, how delivery went."""

    key: str  # the alert's id: "{contradiction_id or summary key}:{channel}"
    channel: str
    channel_kind: str
    kind: AlertKind
    team: str | None
    contradiction_id: str | None
    title: str
    status: AlertStatus
    attempts: int
    next_attempt_at: Time
    last_error: str | None
    dropped_reason: str | None
    created_at: Time
    last_attempt_at: Time | None
    delivered_at: Time | None

    @classmethod
    def of(cls, a: Alert) -> AlertView:
        try:
            title = a.message.title
        except ValueError:  # a payload this version cannot read: still listed
            title = "(unreadable message)"
        data = a.model_dump(exclude={"payload_json"})
        return cls(**data, title=title)


class RequeueReport(BaseModel):
    requeued: int  # failed alerts made pending again by this call
    alerts: list[AlertView]  # the alerts named, as they are now


def stored_status(status: StatusFilter | None) -> AlertStatus | None:
    return "delivered" if status == "sent" else status


def _visible(access: Access, a: Alert) -> bool:
    return access.teams is None or (a.team is not None and a.team in access.teams)


def list_alerts(
    graph: GraphStore, access: Access, status: StatusFilter | None = None, team: str | None = None
) -> list[AlertView]:
    """The alerts the caller may see (of ``status``, of ``team``), oldest first. Admin only."""
    access.require("admin", team)
    found = Outbox(graph).list(stored_status(status))
    return [AlertView.of(a) for a in found if _visible(access, a) and (team is None or a.team == team)]


def requeue_alerts(
    graph: GraphStore, access: Access, now: datetime, keys: Sequence[str] | None = None
) -> RequeueReport:
    """Make failed alerts pending again: those ``keys`` (each must exist and be visible, else
    NotFound), or every failed alert the caller may see. Admin only; idempotent."""
    access.require("admin")
    outbox = Outbox(graph)
    if keys is None:
        named = [a for a in outbox.list("failed") if _visible(access, a)]
    else:
        have = {a.key: a for a in outbox.list() if _visible(access, a)}
        missing = [k for k in keys if k not in have]
        if missing:
            raise NotFound(f"no alert with id {missing[0]!r} (see `taskzilla-sleep alerts list`)")
        named = [have[k] for k in dict.fromkeys(keys)]
    failed = [a.key for a in named if a.status == "failed"]
    n = outbox.requeue_failed(now, failed) if failed else 0
    now_held = {a.key: a for a in outbox.list()}
    return RequeueReport(requeued=n, alerts=[AlertView.of(now_held[a.key]) for a in named])
