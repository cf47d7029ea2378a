"""The outbox's and the lease's rules on the in-memory store: no process, no network.

Chat deliveries go through httpx's MockTransport (the senders' own HTTP code, no socket). The same
rules against real backends and a real HTTP receiver: tests/contract/test_alerts.py, test_lease.py.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import httpx

from taskzilla_sleep.alerts.delivery import deliver_due
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.alerts.senders import SlackSender
from taskzilla_sleep.core.models import Contradiction, ContradictionKind
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings
from taskzilla_sleep.runtime.lease import Lease, holding
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import LeaseClaim
from tests.unit.steps.conftest import NIGHT, TEAM, episode, pattern

CHANNELS = {"team-slack": AlertChannel(kind="slack", url_env="X")}


def contradiction(graph: MemoryGraphStore) -> Contradiction:
    eps = [episode(i, f"standup rule {i}") for i in range(4)]
    graph.upsert_episodes(eps, [])
    old, new = pattern("pat-old", "Standups are async.", eps[:2]), pattern("pat-new", "Standup is a call.", eps[2:])
    for p in (old, new):
        graph.write_pattern(p, [], [])
    c = Contradiction(
        id="con-1",
        team=TEAM,
        old_pattern_id=old.id,
        new_pattern_id=new.id,
        kind=ContradictionKind.UPDATE,
        opened_at=NIGHT,
    )
    graph.open_contradiction(c, counter=2, old_confidence=0.5)
    return c


def slack(handler: httpx.MockTransport) -> SlackSender:
    return SlackSender("team-slack", "https://hooks.example/services/T000/B000/secret-part", 5.0, transport=handler)


def test_an_open_contradiction_is_queued_once_and_delivered_once() -> None:
    graph = MemoryGraphStore()
    contradiction(graph)
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(CHANNELS, NIGHT) == 1
    assert outbox.sync_contradictions(CHANNELS, NIGHT) == 0  # already queued: nothing twice
    posted: list[dict[str, object]] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content))
        return httpx.Response(200)

    sender = slack(httpx.MockTransport(receiver))
    report = deliver_due(outbox, {"team-slack": sender}, AlertSettings(channels=CHANNELS), NIGHT)
    assert report.delivered == 1 and len(posted) == 1 and "con-1" in str(posted[0]["text"])
    assert deliver_due(outbox, {"team-slack": sender}, AlertSettings(channels=CHANNELS), NIGHT).delivered == 0
    (alert,) = outbox.list()
    assert alert.status == "delivered" and alert.message.id == "con-1"
    sender.close()


def test_a_failing_channel_backs_off_and_gives_up_after_max_attempts() -> None:
    graph = MemoryGraphStore()
    contradiction(graph)
    outbox = Outbox(graph)
    outbox.sync_contradictions(CHANNELS, NIGHT)
    sender = slack(httpx.MockTransport(lambda _r: httpx.Response(503)))
    settings = AlertSettings(channels=CHANNELS, max_attempts=2, backoff_base_s=60, backoff_max_s=600)
    assert deliver_due(outbox, {"team-slack": sender}, settings, NIGHT).retried == 1
    (waiting,) = outbox.list("pending")
    assert waiting.attempts == 1 and waiting.next_attempt_at >= NIGHT + timedelta(seconds=30)
    assert deliver_due(outbox, {"team-slack": sender}, settings, NIGHT).retried == 0  # not due yet
    assert deliver_due(outbox, {"team-slack": sender}, settings, waiting.next_attempt_at).failed == 1
    assert [a.status for a in outbox.list()] == ["failed"]
    assert outbox.requeue_failed(NIGHT + timedelta(days=1)) == 1 and outbox.pending_count() == 1
    sender.close()


def test_the_lease_is_exclusive_renewed_by_its_holder_and_released() -> None:
    graph = MemoryGraphStore()
    a, b = Lease(graph, "consolidation", 60, me="a"), Lease(graph, "consolidation", 60, me="b")
    assert a.try_acquire() and not b.try_acquire()
    assert a.try_acquire()  # renewed by its holder
    assert b.holder()[0] == "a"
    with holding(a):
        assert not b.try_acquire()
    assert b.try_acquire()  # released at the end of the holding


def test_a_lease_of_a_gone_process_on_this_machine_is_taken_at_once() -> None:
    graph = MemoryGraphStore()
    mine = Lease(graph, "consolidation", 3600, me="me")
    gone = LeaseClaim("worker@here:gone", mine._host, mine._pid_ns, 2**30)  # no such pid
    now = int(datetime.now(UTC).timestamp() * 1000)
    assert graph.try_lease("consolidation", gone, now, 3_600_000, None)
    assert mine.try_acquire() == (mine._pid_ns is not None)  # Linux: seen dead, taken without waiting
    alive = LeaseClaim("worker@here:alive", mine._host, mine._pid_ns, os.getppid())
    graph.release_lease("consolidation", "me")
    assert graph.try_lease("consolidation", alive, now, 3_600_000, None)
    assert not mine.try_acquire()  # a live holder keeps it
