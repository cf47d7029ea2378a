"""Failed alerts do not vanish: listed, requeued (CLI, admin API), counted in a gauge. On the
in-memory store; the API through FastAPI's TestClient (no socket), the CLI in process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from taskzilla_sleep.alerts.admin import list_alerts, requeue_alerts
from taskzilla_sleep.alerts.outbox import Outbox
from taskzilla_sleep.app import Services
from taskzilla_sleep.core.errors import Forbidden, NotFound, UsageError
from taskzilla_sleep.core.settings import AlertChannel, ApiSettings, Secrets, Settings
from taskzilla_sleep.interfaces import cli_alerts
from taskzilla_sleep.interfaces.api.app import create_app
from taskzilla_sleep.interfaces.cli import make_parser
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock
from taskzilla_sleep.rules.access import OPEN, Access, token_hash
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.memory.vectors import HashEmbedder, MemoryVectorStore
from tests.unit.steps.conftest import NIGHT
from tests.unit.test_outbox_and_lease import contradiction

CHANNELS = {"team-slack": AlertChannel(kind="slack", url_env="X"), "ops": AlertChannel(kind="webhook", url_env="Y")}
ADMIN, PLATFORM_ADMIN, OPS_ADMIN, READER = "t-admin", "t-platform", "t-ops", "t-read"
GRANTS = {
    token_hash(ADMIN): {"name": "root", "teams": ["*"], "role": "admin"},
    token_hash(PLATFORM_ADMIN): {"name": "platform-admin", "teams": ["platform"], "role": "admin"},
    token_hash(OPS_ADMIN): {"name": "ops-admin", "teams": ["ops"], "role": "admin"},
    token_hash(READER): {"name": "bot", "teams": ["platform"], "role": "read"},
}


def failed_outbox(graph: MemoryGraphStore) -> Outbox:
    """A platform contradiction alert per channel, both given up, and a pending summary (no team)."""
    contradiction(graph)
    outbox = Outbox(graph)
    outbox.sync_contradictions(CHANNELS, NIGHT)
    outbox.enqueue_summary("summary_2026-11-28", "3 patterns learned", {"ops": CHANNELS["ops"]}, NIGHT)
    for key in ("con-1:team-slack", "con-1:ops"):
        assert outbox.mark_failed_attempt(key, NIGHT, "HTTP 404: no_service", NIGHT, give_up=True)
    return outbox


def test_failed_alerts_are_listed_counted_and_requeued_once() -> None:
    graph = MemoryGraphStore()
    outbox = failed_outbox(graph)
    assert (outbox.pending_count(), outbox.failed_count()) == (1, 2)  # pending alone would look healthy
    failed = list_alerts(graph, OPEN, "failed")
    assert [(a.key, a.status, a.attempts, a.last_error) for a in failed] == [
        ("con-1:ops", "failed", 1, "HTTP 404: no_service"),
        ("con-1:team-slack", "failed", 1, "HTTP 404: no_service"),
    ]
    assert failed[0].title.startswith("Change in platform to confirm")
    assert [a.key for a in list_alerts(graph, OPEN, "sent")] == []
    later = NIGHT.replace(hour=9)
    one = requeue_alerts(graph, OPEN, later, ["con-1:ops"])
    assert one.requeued == 1
    assert [(a.status, a.attempts, a.last_error, a.next_attempt_at) for a in one.alerts] == [
        ("pending", 0, None, later)
    ]
    assert requeue_alerts(graph, OPEN, later, ["con-1:ops"]).requeued == 0  # idempotent
    summary = requeue_alerts(graph, OPEN, later, ["summary_2026-11-28:ops"])  # pending: left as it is
    assert summary.requeued == 0 and summary.alerts[0].status == "pending"
    assert requeue_alerts(graph, OPEN, later).requeued == 1  # --all-failed: the slack one
    assert requeue_alerts(graph, OPEN, later).requeued == 0
    assert (outbox.pending_count(), outbox.failed_count()) == (3, 0)
    with pytest.raises(NotFound):
        requeue_alerts(graph, OPEN, later, ["con-nope:ops"])


def test_listing_and_requeueing_are_scoped_to_the_callers_teams() -> None:
    graph = MemoryGraphStore()
    failed_outbox(graph)
    platform = Access("platform-admin", frozenset({"platform"}), "admin")
    ops = Access("ops-admin", frozenset({"ops"}), "admin")
    assert len(list_alerts(graph, platform)) == 2  # the summary belongs to admins of every team
    assert list_alerts(graph, ops) == []
    with pytest.raises(NotFound):  # another team's alert does not exist for this caller
        requeue_alerts(graph, ops, NIGHT, ["con-1:ops"])
    assert requeue_alerts(graph, ops, NIGHT).requeued == 0
    with pytest.raises(Forbidden):
        list_alerts(graph, Access("bot", frozenset({"platform"}), "write"), "failed")
    with pytest.raises(Forbidden):
        list_alerts(graph, platform, team="ops")
    assert requeue_alerts(graph, platform, NIGHT).requeued == 2


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, MemoryGraphStore]]:
    settings = Settings(data_dir=tmp_path, api=ApiSettings.model_validate({"tokens": GRANTS}))
    graph = MemoryGraphStore()
    worker = Worker(
        Services(settings, graph, MemoryVectorStore(), HashEmbedder()),
        ScaledClock(NIGHT, 0.0),
        serve_api=False,
        env={},
    )
    yield TestClient(create_app(worker.api_deps())), graph


def test_the_admin_api_lists_and_requeues_failed_alerts(api: tuple[TestClient, MemoryGraphStore]) -> None:
    c, graph = api
    failed_outbox(graph)

    def get(token: str, **params: str) -> list[str]:
        r = c.get("/v1/alerts", params=params, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        return [a["key"] for a in r.json()]

    assert get(ADMIN, status="failed") == ["con-1:ops", "con-1:team-slack"]
    assert get(ADMIN, status="pending") == ["summary_2026-11-28:ops"]
    assert get(PLATFORM_ADMIN) == ["con-1:ops", "con-1:team-slack"]
    assert get(OPS_ADMIN, status="failed") == []
    assert c.get("/v1/alerts", headers={"Authorization": f"Bearer {READER}"}).status_code == 403
    assert c.get("/v1/alerts").status_code == 401
    assert (
        c.get("/v1/alerts", params={"status": "lost"}, headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 422
    )

    def requeue(token: str, key: str) -> tuple[int, dict[str, object]]:
        r = c.post(f"/v1/alerts/{key}/requeue", headers={"Authorization": f"Bearer {token}"})
        return r.status_code, r.json()

    assert requeue(OPS_ADMIN, "con-1:ops")[0] == 404
    assert requeue(READER, "con-1:ops")[0] == 403
    status, body = requeue(PLATFORM_ADMIN, "con-1:ops")
    assert status == 200 and body["requeued"] == 1
    assert body["alerts"][0]["status"] == "pending"  # type: ignore[index]
    assert requeue(PLATFORM_ADMIN, "con-1:ops")[1]["requeued"] == 0  # idempotent
    assert get(ADMIN, status="failed") == ["con-1:team-slack"]
    schema = c.get("/openapi.json").json()
    ops = {op["operationId"]: op for item in schema["paths"].values() for op in item.values()}
    assert {"400", "401", "403", "404", "422", "503"} <= set(ops["requeueAlert"]["responses"])
    assert {"401", "403", "422", "503"} <= set(ops["listAlerts"]["responses"])


def test_the_cli_lists_and_requeues(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    graph = MemoryGraphStore()
    with capture_logs():
        failed_outbox(graph)

    @contextmanager
    def build(*_args: object) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace(graph=graph)  # the CLI's stores: the fake instead of the configured ones

    monkeypatch.setattr("taskzilla_sleep.app.build", build)

    def run(*argv: str) -> str:
        with capture_logs():
            assert cli_alerts.cmd_alerts(make_parser().parse_args(["alerts", *argv]), Settings(), Secrets()) == 0
        return capsys.readouterr().out

    assert [a["key"] for a in json.loads(run("list", "--status", "failed", "--json"))] == [
        "con-1:ops",
        "con-1:team-slack",
    ]
    assert run("requeue", "--all-failed").startswith("requeued 2 failed alerts")
    assert run("requeue", "con-1:ops").startswith("requeued 0 failed alerts")  # idempotent
    assert run("list", "--status", "failed").strip() == "(no alerts)"
    with pytest.raises(UsageError):
        run("requeue")
