"""What ops needs of the outbox, on the in-memory store: per-team channel routing, no alert for a
contradiction resolved before its delivery, no summary of a night that changed nothing. No process,
no network (httpx's MockTransport).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from taskzilla_sleep.alerts.delivery import deliver_due
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.app import Services
from taskzilla_sleep.core.models import ContradictionStatus
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings, Settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.observe.report.night import night_changed
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.memory.vectors import HashEmbedder, MemoryVectorStore
from tests.unit.steps.conftest import NIGHT
from tests.unit.test_outbox_and_lease import CHANNELS, contradiction, slack


def test_an_alert_goes_only_to_the_channels_of_its_team() -> None:
    graph = MemoryGraphStore()
    contradiction(graph)  # team "platform"
    channels = {
        "platform-slack": AlertChannel(kind="slack", url_env="A", teams=["platform"]),
        "infra-hook": AlertChannel(kind="webhook", url_env="B", teams=["infra", "data"]),
        "ops-all": AlertChannel(kind="webhook", url_env="C"),  # the default: every team
        "two": AlertChannel(kind="webhook", url_env="D", teams=["infra", "platform"]),
    }
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(channels, NIGHT) == 3
    assert sorted(a.channel for a in outbox.list()) == ["ops-all", "platform-slack", "two"]
    assert outbox.sync_contradictions(channels, NIGHT) == 0  # the infra channel is not "missing" one
    # The nightly summary speaks of every team: only channels of every team get it.
    assert outbox.enqueue_summary("summary_2026-11-28", "3 patterns learned", channels, NIGHT) == 1
    assert [a.channel for a in outbox.list() if a.kind == "summary"] == ["ops-all"]


def test_a_backlog_queued_before_a_channel_was_limited_to_some_teams_is_not_sent_to_it() -> None:
    graph = MemoryGraphStore()
    contradiction(graph)  # team "platform"
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(CHANNELS, NIGHT) == 1  # the channel was for every team then
    limited = {"team-slack": CHANNELS["team-slack"].model_copy(update={"teams": ["infra"]})}
    posted: list[httpx.Request] = []
    sender = slack(httpx.MockTransport(lambda r: posted.append(r) or httpx.Response(200)))
    report = deliver_due(outbox, {"team-slack": sender}, AlertSettings(channels=limited), NIGHT)
    sender.close()
    assert posted == [] and report.dropped == 1
    (alert,) = outbox.list("dropped")
    assert alert.dropped_reason == "channel team-slack is not for team platform (alerts.channels.team-slack.teams)"


def test_channel_teams_default_to_every_team_and_are_checked() -> None:
    assert AlertChannel(kind="slack", url_env="A").teams == ["*"]
    assert AlertChannel(kind="slack", url_env="A").routes("anything")
    assert not AlertChannel(kind="slack", url_env="A", teams=["platform"]).routes(None)
    for bad in ([], ["no spaces"], [""]):
        with pytest.raises(ValidationError):
            AlertChannel(kind="slack", url_env="A", teams=bad)


def test_an_alert_whose_contradiction_was_resolved_before_delivery_is_dropped_not_sent() -> None:
    graph = MemoryGraphStore()
    c = contradiction(graph)
    outbox = Outbox(graph)
    assert outbox.sync_contradictions(CHANNELS, NIGHT) == 1
    # A person resolves it before the channel's turn comes (e.g. while the receiver was down).
    winner, loser = sorted(graph.patterns_by_id(list(c.pattern_ids)), key=lambda p: p.id != c.new_pattern_id)
    done = c.model_copy(
        update={
            "status": ContradictionStatus.RESOLVED,
            "resolution": "new",
            "resolved_by": "dana",
            "resolved_at": NIGHT,
        }
    )
    graph.resolve_supersede(done, winner, loser)
    posted: list[object] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content))
        return httpx.Response(200)

    sender = slack(httpx.MockTransport(receiver))
    report = deliver_due(outbox, {"team-slack": sender}, AlertSettings(channels=CHANNELS), NIGHT)
    sender.close()
    assert posted == [] and (report.delivered, report.dropped, report.failed) == (0, 1, 0)
    (alert,) = outbox.list()
    assert alert.status == "dropped" and alert.attempts == 0 and alert.delivered_at is None
    assert alert.dropped_reason is not None and "con-1 was resolved by dana" in alert.dropped_reason
    assert outbox.pending_count() == 0 and outbox.requeue_failed(NIGHT) == 0  # dropped is final
    assert outbox.sync_contradictions(CHANNELS, NIGHT) == 0  # and never queued again


def test_a_night_that_changed_nothing_posts_no_summary(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        alerts=AlertSettings(channels={"ops": AlertChannel(kind="webhook", url_env="HOOK")}, nightly_summary=True),
    )
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    worker = Worker(services, ScaledClock(NIGHT, speed=1.0), serve_api=False, env={"HOOK": "http://127.0.0.1:9/hook"})
    try:
        # The night's team jobs as the ledger has them: one team's prune looked and changed nothing.
        empty = run_night(services, NightRequest(now=NIGHT, trigger="schedule", slot="2026-11-28", teams=["a"]))
        assert empty.ok and not night_changed(empty)
        worker._night_summary("2026-11-28")  # a new, empty install: four "no changes" lines are no news
        assert Outbox(services.graph).list() == []
        changed = empty.run.model_copy(update={"id": "run-b", "team": "b"}, deep=True)
        changed.steps[0].counts = {"pruned": 2}
        services.graph.save_run(changed)
        worker._night_summary("2026-11-28")
        worker._night_summary("2026-11-28")  # another replica sees the night complete too: still one
        (summary,) = Outbox(services.graph).list()
        assert summary.kind == "summary" and "pruned 2" in summary.message.text
    finally:
        worker._shutdown()
