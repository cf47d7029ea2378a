"""Chat alerts end to end on every graph backend, delivered over real HTTP to receivers on 127.0.0.1.

Embedded FalkorDB always; Neo4j through the ``neo4j_uri`` fixture; and the in-memory fake the unit
tests use, held to the same outbox contract (its "new store on the same data" is the same object).
The receivers are real ThreadingHTTPServers (tests/http_receiver.py) that can fail, hang or drop
the connection.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from taskzilla_sleep.alerts.delivery import DeliveryReport, deliver_due
from taskzilla_sleep.alerts.outbox import Alert, Outbox
from taskzilla_sleep.alerts.render import slack_payload, telegram_payload, webhook_payload
from taskzilla_sleep.alerts.senders import Sender, build_senders, close_senders
from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.core.models import (
    Contradiction,
    ContradictionStatus,
    Episode,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
)
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings
from taskzilla_sleep.rules.policies import contradiction_id
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import EpisodeUpdate, GraphStore
from tests.http_receiver import Receiver, free_port

T0 = datetime(2026, 11, 28, 2, 15, tzinfo=UTC)
TEAM = "platform"
SLACK_SECRET = "SlackSecretPart9f8e7d6c5b4a"
HOOK_SECRET = "hookSecret4b1d2c3e5f60"
TG_TOKEN = "987654:AAF-telegram-secret-abcdef0123"
SECRETS = (SLACK_SECRET, HOOK_SECRET, TG_TOKEN, TG_TOKEN.partition(":")[2])
CHAT_ID = "-1001234"
PAST_ANY_BACKOFF = timedelta(seconds=121)  # backoff_max_s is 120 in these tests


class Backend:
    """The graph of one backend, and a way to 'restart the worker': a NEW store on the same data."""

    def __init__(self, name: str, opener: Callable[[], GraphStore]) -> None:
        self.name = name
        self._open = opener
        self.graph = opener()

    def restart(self) -> GraphStore:
        self.graph.close()
        self.graph = self._open()
        return self.graph

    def another(self) -> GraphStore:
        """A second store instance on the same data, as a second replica would have."""
        return self._open()


@pytest.fixture(params=["memory", "falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    opener: Callable[[], GraphStore]
    if request.param == "memory":
        fake = MemoryGraphStore()

        def opener() -> GraphStore:
            return fake
    elif request.param == "falkordb":
        from taskzilla_sleep.stores.falkordb import open_falkordb

        def opener() -> GraphStore:
            return open_falkordb(tmp_path / "falkordb", connect_timeout_s=5)
    else:
        from taskzilla_sleep.stores.neo4j import open_neo4j
        from tests.neo4j_service import neo4j_auth

        uri = request.getfixturevalue("neo4j_uri")

        def opener() -> GraphStore:
            return open_neo4j(uri, neo4j_auth(), connect_timeout_s=5)

    b = Backend(request.param, opener)
    try:
        b.graph.delete_all()
        b.graph.ensure_schema()  # the Alert key and status indexes are part of the graph's schema
        yield b
    finally:
        b.graph.delete_all()
        b.graph.close()


@pytest.fixture
def receivers() -> Iterator[Callable[..., Receiver]]:
    """Start receivers on demand; every one of them is stopped at the end of the test."""
    with ExitStack() as stack:

        def start(*script: str | int, default: str | int = "ok", echo_path: bool = False) -> Receiver:
            r = Receiver(script, default, echo_path=echo_path).start()
            stack.callback(r.stop)
            return r

        yield start


# -- building blocks -----------------------------------------------------------------------------


def episode(eid: str, author: str, text: str, hours_ago: float) -> Episode:
    return Episode(
        id=eid,
        team=TEAM,
        channel="standup",
        author=author,
        text=text,
        ts=T0 - timedelta(hours=hours_ago),
        provenance=Provenance.HUMAN,
        ingested_at=T0 - timedelta(hours=hours_ago),
    )


def pattern(pid: str, statement: str, evidence: list[Episode], confidence: float) -> Pattern:
    first, last = min(e.ts for e in evidence), max(e.ts for e in evidence)
    return Pattern(
        id=pid,
        team=TEAM,
        statement=statement,
        kind=PatternKind.NORM,
        status=PatternStatus.ACTIVE,
        confidence=confidence,
        evidence_ids=[e.id for e in evidence],
        support_count=len(evidence),
        distinct_authors=len({e.author for e in evidence}),
        distinct_channels=1,
        first_seen=first,
        last_seen=last,
        created_at=last,
        updated_at=last,
        valid_from=first,
    )


def open_contradiction(graph: GraphStore, n: int = 1) -> Contradiction:
    """Two beliefs with their evidence, and the contradiction between them, written as reflect does."""
    old_eps = [
        episode(f"ep-{n}-o1", "sara", f"[{n}] standups are async, write your update in the thread", 300),
        episode(f"ep-{n}-o2", "tom", f"[{n}] async standup: deploys green, nothing blocked", 200),
        episode(f"ep-{n}-o3", "sara", f"[{n}] again: please keep standup async in the thread", 100),
    ]
    new_eps = [
        episode(f"ep-{n}-n1", "martin", f"[{n}] from Monday standup is a 10:00 voice call", 30),
        episode(f"ep-{n}-n2", "lea", f"[{n}] see you at the 10:00 standup call", 20),
    ]
    graph.upsert_episodes(old_eps + new_eps, [])
    old = pattern(f"pat-{n}-old", f"[{n}] Standups are async in the #standup thread.", old_eps, 0.86)
    new = pattern(f"pat-{n}-new", f"[{n}] Standup is a 10:00 voice call.", new_eps, 0.81)
    for p, eps in ((old, old_eps), (new, new_eps)):
        graph.write_pattern(p, [], [EpisodeUpdate(id=e.id, absorbed_by=p.id) for e in eps])
    c = Contradiction(
        id=contradiction_id(TEAM, old.id, new.id),
        team=TEAM,
        old_pattern_id=old.id,
        new_pattern_id=new.id,
        opened_at=T0 + timedelta(minutes=n),
        reason="async thread vs live call",
    )
    graph.open_contradiction(c, counter=new.support_count, old_confidence=0.62)
    return c


def channels_for(
    slack: Receiver | None = None, telegram: Receiver | int | None = None, hook: Receiver | None = None
) -> tuple[dict[str, AlertChannel], dict[str, str]]:
    """Channel settings and the environment holding their secrets (pointing at the receivers)."""
    channels: dict[str, AlertChannel] = {}
    env: dict[str, str] = {}
    if slack is not None:
        channels["team-slack"] = AlertChannel(kind="slack", url_env="TEST_SLACK_URL")
        env["TEST_SLACK_URL"] = slack.url(f"/services/T000/B000/{SLACK_SECRET}")
    if telegram is not None:
        channels["ops-telegram"] = AlertChannel(kind="telegram", token_env="TEST_TG_TOKEN", chat_id=CHAT_ID)
        env["TEST_TG_TOKEN"] = TG_TOKEN
        base = telegram.url("/tg") if isinstance(telegram, Receiver) else f"http://127.0.0.1:{telegram}/tg"
        env["TASKZILLA_TELEGRAM_API_BASE"] = base
    if hook is not None:
        channels["pager"] = AlertChannel(kind="webhook", url_env="TEST_HOOK_URL")
        env["TEST_HOOK_URL"] = hook.url(f"/hook/{HOOK_SECRET}")
    return channels, env


def alert_settings(channels: dict[str, AlertChannel], **over: float) -> AlertSettings:
    base: dict[str, float] = {"timeout_s": 0.5, "max_attempts": 10, "backoff_base_s": 30, "backoff_max_s": 120}
    return AlertSettings.model_validate({"channels": channels, **base, **over})


def deliver(outbox: Outbox, settings: AlertSettings, env: dict[str, str], now: datetime) -> DeliveryReport:
    senders = build_senders(settings, env)
    try:
        return deliver_due(outbox, senders, settings, now)
    finally:
        close_senders(senders)


def count_alert_nodes(graph: GraphStore) -> tuple[int, int]:
    if isinstance(graph, MemoryGraphStore):
        return len(graph.outbox), len(graph.alert_for)
    assert isinstance(graph, CypherGraphStore)
    nodes = int(graph.executor.read("MATCH (a:Alert) RETURN count(a) AS n")[0]["n"])
    links = int(graph.executor.read("MATCH (:Alert)-[r:ALERT_FOR]->(:Contradiction) RETURN count(r) AS n")[0]["n"])
    return nodes, links


def by_key(outbox: Outbox) -> dict[str, Alert]:
    return {a.key: a for a in outbox.list()}


# -- the tests -----------------------------------------------------------------------------------


def test_sync_then_deliver_sends_the_right_message_to_each_channel(
    backend: Backend, receivers: Callable[..., Receiver]
) -> None:
    c = open_contradiction(backend.graph)
    slack, tg, hook = receivers(), receivers(), receivers()
    channels, env = channels_for(slack, tg, hook)
    settings = alert_settings(channels)
    outbox = Outbox(backend.graph)

    # A worker that never saw reflect open it (crash in between, or another replica) queues it.
    assert outbox.sync_contradictions(channels, T0) == 3
    alerts = by_key(outbox)
    assert sorted(alerts) == sorted(f"{c.id}:{ch}" for ch in ("team-slack", "ops-telegram", "pager"))
    assert {(a.status, a.attempts, a.contradiction_id, a.team) for a in alerts.values()} == {("pending", 0, c.id, TEAM)}
    assert outbox.pending_count() == 3 and len(outbox.due(T0)) == 3

    report = deliver(outbox, settings, env, T0)
    assert (report.delivered, report.retried, report.failed) == (3, 0, 0)
    assert {n: r.delivered for n, r in report.by_channel.items()} == {"team-slack": 1, "ops-telegram": 1, "pager": 1}

    msg = alerts[f"{c.id}:pager"].message
    assert msg.old is not None and msg.new is not None
    assert msg.old.statement == "[1] Standups are async in the #standup thread." and msg.old.evidence == 3
    assert msg.new.statement == "[1] Standup is a 10:00 voice call." and msg.new.evidence == 2
    # Two examples each: the latest evidence, from different people where there are.
    assert [e.episode_id for e in msg.old.examples] == ["ep-1-o2", "ep-1-o3"]
    assert [e.episode_id for e in msg.new.examples] == ["ep-1-n1", "ep-1-n2"]

    (h,) = hook.received()
    assert h.path == f"/hook/{HOOK_SECRET}"
    assert h.headers["Idempotency-Key"] == f"{c.id}:pager"
    assert h.headers["Content-Type"] == "application/json"
    body = h.json()
    assert body == webhook_payload(msg, f"{c.id}:pager")
    assert (body["type"], body["id"], body["team"], body["idempotency_key"]) == (
        "contradiction",
        c.id,
        TEAM,
        f"{c.id}:pager",
    )
    assert body["old"]["id"] == "pat-1-old" and body["new"]["id"] == "pat-1-new"
    assert body["resolve"]["http"]["path"] == f"/v1/contradictions/{c.id}/resolve"
    assert f"contradictions resolve {c.id} --keep new|old|both --by NAME" in body["resolve"]["cli"]

    (s,) = slack.received()
    assert s.path == f"/services/T000/B000/{SLACK_SECRET}"
    assert s.json() == slack_payload(alerts[f"{c.id}:team-slack"].message)
    assert c.id in s.json()["text"] and s.json()["blocks"][0]["type"] == "header"

    (t,) = tg.received()
    assert t.path == f"/tg/bot{TG_TOKEN}/sendMessage"
    assert t.json() == telegram_payload(alerts[f"{c.id}:ops-telegram"].message, CHAT_ID)
    assert t.json()["chat_id"] == CHAT_ID and c.id in t.json()["text"]

    after = by_key(outbox)
    assert {(a.status, a.attempts, a.delivered_at, a.last_error) for a in after.values()} == {
        ("delivered", 1, T0, None)
    }
    assert outbox.pending_count() == 0 and outbox.due(T0 + timedelta(days=1)) == []

    # Nothing more to do: no second POST, even much later; a second sync queues nothing.
    assert deliver(outbox, settings, env, T0 + timedelta(days=1)).delivered == 0
    assert outbox.sync_contradictions(channels, T0 + timedelta(days=1)) == 0
    assert len(slack.received()) == len(tg.received()) == len(hook.received()) == 1


def test_down_receivers_and_a_worker_restart_still_deliver_exactly_once(
    backend: Backend, receivers: Callable[..., Receiver]
) -> None:
    c1 = open_contradiction(backend.graph, 1)
    c2 = open_contradiction(backend.graph, 2)
    # Each receiver is down for its first 3 requests, in every way a receiver can be down.
    hook = receivers(500, "hang", "close")
    tg = receivers(429, 503, "close")
    channels, env = channels_for(telegram=tg, hook=hook)
    settings = alert_settings(channels)
    outbox = Outbox(backend.graph)
    assert outbox.sync_contradictions(channels, T0) == 4

    now = T0
    r1 = deliver(outbox, settings, env, now)
    # The first failure ends a channel's round: the second alert of that channel is not tried.
    assert (r1.delivered, r1.retried) == (0, 2)
    assert len(hook.received()) == len(tg.received()) == 1
    # Backing off: nothing is due right after a failure.
    assert deliver(outbox, settings, env, now + timedelta(seconds=1)).retried == 0
    assert len(hook.received()) == len(tg.received()) == 1

    now += PAST_ANY_BACKOFF
    r2 = deliver(outbox, settings, env, now)
    assert (r2.delivered, r2.retried) == (0, 2)

    # The worker restarts: a NEW store instance on the same data, a new outbox, new senders.
    outbox.close()
    graph = backend.restart()
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(channels, now) == 0  # nothing lost, nothing duplicated
    assert outbox.pending_count() == 4

    now += PAST_ANY_BACKOFF
    r3 = deliver(outbox, settings, env, now)
    assert (r3.delivered, r3.retried) == (0, 2)
    now += PAST_ANY_BACKOFF
    r4 = deliver(outbox, settings, env, now)
    assert (r4.delivered, r4.retried, r4.failed) == (4, 0, 0)
    now += timedelta(days=2)
    assert deliver(outbox, settings, env, now).delivered == 0

    for rx, ch in ((hook, "pager"), (tg, "ops-telegram")):
        assert len(rx.received()) == 5  # 3 failures + 2 deliveries, no more
        for c in (c1, c2):
            key = f"{c.id}:{ch}"
            mine = [r for r in rx.received() if c.id in r.body.decode()]
            assert mine, key
            assert {r.headers["Idempotency-Key"] for r in mine} == {key}  # the same key on every attempt
            assert len([r for r in mine if r.answered == "ok"]) == 1  # exactly one successful delivery
            assert len({r.body for r in mine}) == 1  # the same payload on every attempt
    alerts = by_key(outbox)
    assert {a.status for a in alerts.values()} == {"delivered"}
    assert sum(a.attempts for a in alerts.values()) == 10
    assert all(a.last_error is None and a.delivered_at == now - timedelta(days=2) for a in alerts.values())
    assert count_alert_nodes(graph) == (4, 4)


def test_a_failing_channel_does_not_block_the_others(backend: Backend, receivers: Callable[..., Receiver]) -> None:
    c1 = open_contradiction(backend.graph, 1)
    c2 = open_contradiction(backend.graph, 2)
    slack = receivers()
    hook = receivers(default="hang")
    # Telegram points at a port nothing listens on: connection refused on every attempt.
    channels, env = channels_for(slack=slack, telegram=free_port(), hook=hook)
    settings = alert_settings(channels, timeout_s=1.0)
    outbox = Outbox(backend.graph)
    outbox.sync_contradictions(channels, T0)

    t0 = time.monotonic()
    report = deliver(outbox, settings, env, T0)
    elapsed = time.monotonic() - t0
    assert report.by_channel["team-slack"].delivered == 2
    assert report.by_channel["pager"].retried == 1 and report.by_channel["ops-telegram"].retried == 1
    assert elapsed < 5, elapsed  # a hung channel costs one timeout, in parallel with the others
    assert len(slack.received()) == 2 and len(hook.received()) == 1

    alerts = by_key(outbox)
    for c in (c1, c2):
        assert alerts[f"{c.id}:team-slack"].status == "delivered"
    hung = [a for a in alerts.values() if a.channel == "pager" and a.attempts == 1]
    refused = [a for a in alerts.values() if a.channel == "ops-telegram" and a.attempts == 1]
    assert len(hung) == 1 and hung[0].status == "pending" and hung[0].last_error == "timed out after 1s"
    assert len(refused) == 1 and refused[0].last_error is not None and "ConnectError" in refused[0].last_error
    assert hung[0].next_attempt_at >= T0 + timedelta(seconds=15)  # backoff: at least half the base


def test_max_attempts_marks_failed_and_keeps_it_listed(backend: Backend, receivers: Callable[..., Receiver]) -> None:
    c = open_contradiction(backend.graph)
    hook = receivers(default=404)  # a config problem: retried anyway, and logged as an error
    channels, env = channels_for(hook=hook)
    settings = alert_settings(channels, max_attempts=3)
    outbox = Outbox(backend.graph)
    outbox.sync_contradictions(channels, T0)

    now = T0
    with structlog.testing.capture_logs() as logs:
        reports = []
        for _ in range(3):
            reports.append(deliver(outbox, settings, env, now))
            now += PAST_ANY_BACKOFF
    assert [(r.retried, r.failed) for r in reports] == [(1, 0), (1, 0), (0, 1)]
    events = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("alert_")]
    assert events == [("alert_config_problem", "error")] * 2 + [("alert_gave_up", "error")]

    (failed,) = outbox.list(status="failed")
    assert failed.key == f"{c.id}:pager" and failed.attempts == 3
    assert failed.last_error == "HTTP 404: error 404"
    assert [a.key for a in outbox.list()] == [failed.key]  # still listed, never deleted
    assert outbox.pending_count() == 0 and outbox.due(now + timedelta(days=30)) == []
    assert deliver(outbox, settings, env, now + timedelta(days=30)).failed == 0
    assert len(hook.received()) == 3
    now += timedelta(days=30)
    # The contradiction stays open: a later sync must not re-queue what failed.
    assert outbox.sync_contradictions(channels, now) == 0

    # Once the config is fixed, a person re-sends it: same key, a fresh attempt budget.
    hook.default = "ok"
    assert outbox.requeue_failed(now, keys=["nope"]) == 0
    assert outbox.requeue_failed(now) == 1
    assert deliver(outbox, settings, env, now).delivered == 1
    (done,) = outbox.list()
    assert (done.status, done.attempts) == ("delivered", 1)
    assert [r.headers["Idempotency-Key"] for r in hook.received()] == [failed.key] * 4


def test_sync_is_idempotent_and_follows_the_channels(backend: Backend, receivers: Callable[..., Receiver]) -> None:
    c1 = open_contradiction(backend.graph, 1)
    hook, slack = receivers(), receivers()
    channels, _ = channels_for(slack=slack, hook=hook)
    only_hook = {"pager": channels["pager"]}
    outbox = Outbox(backend.graph)

    assert outbox.sync_contradictions(only_hook, T0) == 1
    assert outbox.sync_contradictions(only_hook, T0 + timedelta(hours=1)) == 0
    assert count_alert_nodes(backend.graph) == (1, 1)
    # A channel added later gets the open contradictions; a disabled one gets nothing.
    disabled = {**channels, "muted": AlertChannel(kind="webhook", url_env="X", enabled=False)}
    assert outbox.sync_contradictions(disabled, T0 + timedelta(hours=2)) == 1
    c2 = open_contradiction(backend.graph, 2)
    assert outbox.sync_contradictions(disabled, T0 + timedelta(hours=3)) == 2
    assert outbox.sync_contradictions(disabled, T0 + timedelta(hours=3)) == 0
    assert count_alert_nodes(backend.graph) == (4, 4)
    assert sorted(a.key for a in outbox.list()) == sorted(
        f"{c.id}:{ch}" for c in (c1, c2) for ch in ("pager", "team-slack")
    )
    # created_at is the first sync's clock, not overwritten by later ones.
    assert by_key(outbox)[f"{c1.id}:pager"].created_at == T0

    # Two "replicas" syncing at once still make one alert per contradiction and channel.
    other = backend.another()
    try:
        c3 = open_contradiction(backend.graph, 3)
        outboxes = [outbox, Outbox(other)]
        results: list[int] = []
        threads = [
            threading.Thread(target=lambda o=o: results.append(o.sync_contradictions(channels, T0))) for o in outboxes
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(results) == 2
    finally:
        other.close()  # on FalkorDB a client of the same server: closing it stops nothing
    assert count_alert_nodes(backend.graph) == (6, 6)
    assert {a.key for a in outbox.list()} >= {f"{c3.id}:pager", f"{c3.id}:team-slack"}

    # Summaries: one per key and channel, however often they are queued.
    assert outbox.enqueue_summary("summary_2026-11-28", "3 patterns learned", channels, T0) == 2
    outbox.enqueue_summary("summary_2026-11-28", "3 patterns learned", channels, T0)
    summaries = [a for a in outbox.list() if a.kind == "summary"]
    assert sorted(a.key for a in summaries) == ["summary_2026-11-28:pager", "summary_2026-11-28:team-slack"]
    assert summaries[0].message.text.endswith("3 patterns learned")


def test_two_replicas_delivering_at_once_post_each_alert_once(
    backend: Backend, receivers: Callable[..., Receiver]
) -> None:
    ids = [open_contradiction(backend.graph, n).id for n in range(1, 7)]
    hook = receivers()
    channels, env = channels_for(hook=hook)
    settings = alert_settings(channels)
    Outbox(backend.graph).sync_contradictions(channels, T0)

    other = backend.another()
    senders: list[dict[str, Sender]] = []
    try:
        outboxes = [Outbox(backend.graph), Outbox(other)]
        senders = [build_senders(settings, env) for _ in outboxes]
        reports: list[DeliveryReport] = []
        start = threading.Barrier(2, timeout=10)

        def run(i: int) -> None:
            start.wait()
            reports.append(deliver_due(outboxes[i], senders[i], settings, T0))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    finally:
        for s in senders:
            close_senders(s)
        other.close()
    assert sum(r.delivered for r in reports) == 6
    keys = [r.headers["Idempotency-Key"] for r in hook.received()]
    assert sorted(keys) == sorted(f"{i}:pager" for i in ids)  # each exactly once


def test_secrets_never_reach_logs_errors_reprs_or_the_store(
    backend: Backend,
    receivers: Callable[..., Receiver],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    open_contradiction(backend.graph)
    slack = receivers(default=404, echo_path=True)  # the error body repeats the secret path
    hook = receivers(default="hang")
    channels, env = channels_for(slack=slack, telegram=free_port(), hook=hook)
    settings = alert_settings(channels, max_attempts=2)
    outbox = Outbox(backend.graph)
    outbox.sync_contradictions(channels, T0)

    # The worker's own logging setup, at debug level, with NO secrets handed to the masker: the
    # alerts module must keep them out on its own. (logs.py keeps httpx, which logs request URLs
    # at INFO, at WARNING.)
    configure_logging(level="debug", json=True)
    caplog.set_level(logging.DEBUG)
    try:
        senders = build_senders(settings, env)
        try:
            reprs = repr(senders)
            reports = [deliver_due(outbox, senders, settings, T0 + PAST_ANY_BACKOFF * i) for i in range(2)]
        finally:
            close_senders(senders)
    finally:
        structlog.reset_defaults()
    logged = capsys.readouterr().err + caplog.text
    assert "alert_config_problem" in logged and "alert_gave_up" in logged  # the logs did speak

    slack_rx = slack.received()
    assert slack_rx and all(r.path.endswith(SLACK_SECRET) for r in slack_rx)  # the secret really was used
    alerts = outbox.list()
    errors = [a.last_error or "" for a in alerts] + [
        e for r in reports for ch in r.by_channel.values() for e in ch.errors
    ]
    assert any("HTTP 404: error 404 for" in e for e in errors)
    assert any("timed out" in e for e in errors) and any("ConnectError" in e for e in errors)
    graph = backend.graph
    if isinstance(graph, MemoryGraphStore):
        stored = repr(vars(graph))  # every record the fake holds
    else:
        assert isinstance(graph, CypherGraphStore)
        stored = json.dumps(graph.snapshot(skip_labels=frozenset()), default=str)
    for secret in SECRETS:
        assert secret not in logged
        assert secret not in reprs
        assert all(secret not in e for e in errors), errors
        assert secret not in stored
    assert {a.status for a in alerts} == {"failed"}


def test_a_channel_gets_only_its_teams_alerts_and_a_resolved_one_is_never_posted(
    backend: Backend, receivers: Callable[..., Receiver]
) -> None:
    c1 = open_contradiction(backend.graph, 1)  # of team platform
    hook, slack = receivers(), receivers()
    channels, env = channels_for(slack=slack, hook=hook)
    channels["team-slack"] = channels["team-slack"].model_copy(update={"teams": ["infra"]})
    settings = alert_settings(channels)
    outbox = Outbox(backend.graph)
    assert outbox.sync_contradictions(channels, T0) == 1
    assert [a.channel for a in outbox.list()] == ["pager"]  # not the infra team's slack

    # Resolved by a person before the receiver's turn: dropped with the reason, never posted.
    winner, loser = sorted(backend.graph.patterns_by_id(list(c1.pattern_ids)), key=lambda p: p.id != c1.new_pattern_id)
    done = c1.model_copy(
        update={"status": ContradictionStatus.RESOLVED, "resolution": "new", "resolved_by": "dana", "resolved_at": T0}
    )
    backend.graph.resolve_supersede(done, winner, loser)
    report = deliver(outbox, settings, env, T0 + timedelta(minutes=1))
    assert (report.delivered, report.dropped) == (0, 1) and hook.received() == [] and slack.received() == []
    (dropped,) = outbox.list("dropped")
    assert dropped.dropped_reason is not None and f"{c1.id} was resolved by dana" in dropped.dropped_reason

    c2 = open_contradiction(backend.graph, 2)
    assert outbox.sync_contradictions(channels, T0 + timedelta(minutes=2)) == 1
    assert deliver(outbox, settings, env, T0 + timedelta(minutes=3)).delivered == 1
    assert [r.json()["id"] for r in hook.succeeded()] == [c2.id] and slack.received() == []
