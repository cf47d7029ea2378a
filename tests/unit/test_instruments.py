"""The in-process counters and histograms (instruments.py, api/http_metrics.py) on fakes: one set per
Services (nothing bleeds between two), route templates (never raw paths), and what a night counts.

The live scrape through promtool is tests/contract/test_prometheus.py.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.settings import Settings, load_settings
from taskzilla_sleep.interfaces.api.body_limit import BodyLimit
from taskzilla_sleep.interfaces.api.http_metrics import HttpMetrics
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, run_night
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from tests.unit.steps.conftest import DAY, NIGHT, Fake, belief_of_all, fake  # noqa: F401 (the fixture)
from tests.unit.steps.test_distill import STATEMENT, rules
from tests.unit.test_alert_routing import HashEmbedder


def value(inst: Instruments, name: str, **labels: str) -> float | None:
    return inst.registry.get_sample_value(name, labels)


def test_each_services_counts_on_its_own_registry(tmp_path: Path) -> None:
    one, two = (
        Services(Settings(data_dir=tmp_path), MemoryGraphStore(), MemoryVectorStore(), HashEmbedder()) for _ in range(2)
    )
    assert one.instruments is not two.instruments
    one.instruments.ingested(3, {"chatter": 2})
    assert value(one.instruments, "taskzilla_sleep_episodes_ingested_total") == 3
    assert value(one.instruments, "taskzilla_sleep_episodes_skipped_total", rule="chatter") == 2
    assert value(two.instruments, "taskzilla_sleep_episodes_ingested_total") == 0
    assert value(two.instruments, "taskzilla_sleep_episodes_skipped_total", rule="chatter") is None
    assert value(one.instruments, "taskzilla_sleep_build_info", version=__import__("taskzilla_sleep").__version__) == 1
    assert value(one.instruments, "process_cpu_seconds_total") is not None  # process metrics by default
    assert value(Instruments(process=False), "process_cpu_seconds_total") is None


def test_an_ingest_counts_new_episodes_and_skips_by_rule(tmp_path: Path) -> None:
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})  # the packaged write discipline
    services = Services(settings, MemoryGraphStore(), MemoryVectorStore(), HashEmbedder())
    ts = '"ts": "2026-11-27T10:00:00+01:00", "provenance": "human"'
    lines = [
        f'{{"team": "platform", "channel": "dev", "author": "a", "text": "{text}", {ts}}}'
        for text in ("we deploy on tuesdays", "lgtm", "[github] PR #3 merged", "we deploy on tuesdays")
    ]
    services.ingestor().ingest_lines(lines, "x.jsonl")
    services.ingestor().ingest_lines(lines[:1], "x.jsonl")  # re-sent: present, not ingested again
    inst = services.instruments
    assert value(inst, "taskzilla_sleep_episodes_ingested_total") == 1
    assert value(inst, "taskzilla_sleep_episodes_skipped_total", rule="chatter") == 1
    assert value(inst, "taskzilla_sleep_episodes_skipped_total", rule="github") == 1


def test_alert_rounds_are_counted_by_channel_and_kind() -> None:
    inst = Instruments(process=False)
    report = {
        "ops": SimpleNamespace(delivered=2, retried=0, failed=0),
        "tg": SimpleNamespace(delivered=0, retried=1, failed=1),
        "gone": SimpleNamespace(delivered=1, retried=0, failed=0),  # no longer in the config
    }
    inst.alert_round(report, {"ops": "slack", "tg": "telegram"})
    assert value(inst, "taskzilla_sleep_alert_deliveries_total", channel="ops", channel_kind="slack") == 2
    failures = "taskzilla_sleep_alert_delivery_failures_total"
    assert value(inst, failures, channel="tg", channel_kind="telegram", outcome="retry") == 1
    assert value(inst, failures, channel="tg", channel_kind="telegram", outcome="gave_up") == 1
    assert value(inst, "taskzilla_sleep_alert_deliveries_total", channel="gone", channel_kind="unknown") == 1


class Ledger:
    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self.name, "a ledger gauge")]

    def collect(self) -> list[Metric]:
        return [GaugeMetricFamily(self.name, "a ledger gauge", value=1)]


def test_attach_replaces_the_collector_attached_before() -> None:
    inst = Instruments(process=False)
    registry = inst.attach(Ledger("taskzilla_sleep_first"))
    assert registry is inst.registry and value(inst, "taskzilla_sleep_first") == 1
    inst.attach(Ledger("taskzilla_sleep_second"))  # a second worker on the same Services: no duplicate error
    assert value(inst, "taskzilla_sleep_first") is None and value(inst, "taskzilla_sleep_second") == 1
    with pytest.raises(ValueError):  # the registry still refuses a real duplicate name
        inst.registry.register(Ledger("taskzilla_sleep_second"))
    assert isinstance(inst.registry, CollectorRegistry)


def app_with_metrics(inst: Instruments) -> FastAPI:
    """The API's shape: a router under /v1, a mounted app (as /mcp is), BodyLimit, then HttpMetrics."""
    app = FastAPI()
    v1 = APIRouter(prefix="/v1")

    @v1.get("/patterns/{pattern_id}")
    def pattern(pattern_id: str) -> dict[str, str]:
        return {"id": pattern_id}

    @v1.post("/episodes")
    async def ingest(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @v1.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    app.include_router(v1)
    inner = Starlette(routes=[Route("/", lambda _r: PlainTextResponse("mcp"), methods=["GET", "POST"])])
    app.add_middleware(BodyLimit, limit=100)
    app.add_middleware(HttpMetrics, instruments=inst, routes=app.router.routes)
    app.router.routes.append(Mount("/mcp", app=inner))  # added after the middleware, as the worker does
    return app


def test_http_requests_are_counted_by_route_template_method_and_status() -> None:
    inst = Instruments(process=False)
    c = TestClient(app_with_metrics(inst), raise_server_exceptions=False)
    for i in range(3):
        assert c.get(f"/v1/patterns/pat_{i}").status_code == 200
    assert c.post("/v1/episodes", content=b"x" * 10).status_code == 200
    assert c.post("/v1/episodes", content=b"x" * 500).status_code == 413  # refused by BodyLimit, still counted
    assert c.delete("/v1/patterns/pat_1").status_code == 405
    assert c.get("/v1/boom").status_code == 500
    assert c.get("/mcp/").status_code == 200
    assert c.get("/openapi.json").status_code == 200
    for path in ("/wp-admin.php", "/v1/nope/1", "/v1/patterns"):
        assert c.get(path).status_code == 404
    assert c.request("BREW", "/v1/patterns/pat_1").status_code == 405

    def count(method: str, route: str, status: int) -> float | None:
        return value(inst, "taskzilla_sleep_http_requests_total", method=method, route=route, status=str(status))

    assert count("GET", "/v1/patterns/{pattern_id}", 200) == 3
    assert count("POST", "/v1/episodes", 200) == 1
    assert count("POST", "/v1/episodes", 413) == 1
    assert count("DELETE", "/v1/patterns/{pattern_id}", 405) == 1
    assert count("GET", "/v1/boom", 500) == 1
    assert count("GET", "/mcp/", 200) == 1
    assert count("GET", "/openapi.json", 200) == 1
    assert count("GET", "unmatched", 404) == 3
    assert count("other", "/v1/patterns/{pattern_id}", 405) == 1
    routes = {s.labels["route"] for m in inst.registry.collect() for s in m.samples if "route" in s.labels}
    assert not any("pat_" in r or "wp-admin" in r for r in routes)  # bounded: templates only
    duration = "taskzilla_sleep_http_request_duration_seconds_count"
    assert value(inst, duration, method="GET", route="/v1/patterns/{pattern_id}") == 3


def test_a_night_counts_step_durations_and_pattern_lags_and_a_dry_run_counts_nothing(fake: Fake) -> None:  # noqa: F811
    inst = Instruments(process=False)
    fake.add(*rules())
    fake.llm.beliefs = belief_of_all(STATEMENT)
    dry = run_night(fake, NightRequest(now=NIGHT, dry_run=True), NightHooks(instruments=inst))
    assert dry.ok and value(inst, "taskzilla_sleep_step_duration_seconds_count", step="distill", status="ok") is None
    result = run_night(fake, NightRequest(now=NIGHT, trigger="schedule"), NightHooks(instruments=inst))
    assert result.ok
    for step in ("prune", "distill", "reflect", "decay"):
        assert value(inst, "taskzilla_sleep_step_duration_seconds_count", step=step, status="ok") == 1
    lag = "taskzilla_sleep_pattern_availability_lag_seconds"
    assert value(inst, lag + "_count", trigger="night") == 1
    assert value(inst, lag + "_sum", trigger="night") == pytest.approx((NIGHT - DAY).total_seconds())
    assert value(inst, lag + "_count", trigger="watchdog") == 0  # born at 0, for rate() in the rules
    assert value(inst, "taskzilla_sleep_drift_items_total") == 0
    fake.vectors.delete(fake.graph.teams()[0], "patterns", [p.id for p in fake.graph.patterns(fake.graph.teams()[0])])
    run_night(fake, NightRequest(now=NIGHT + timedelta(days=1), trigger="watchdog"), NightHooks(instruments=inst))
    assert value(inst, "taskzilla_sleep_drift_items_total") == 1  # the deleted vector, repaired
