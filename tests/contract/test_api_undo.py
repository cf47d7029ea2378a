"""Undo and release over the HTTP API (the worker's app, FastAPI's TestClient, embedded stores):
who may, what comes back, the refusal when a later night built on the run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.models import EpisodeStatus, PatternStatus
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from taskzilla_sleep.rules.access import token_hash
from tests.contract.test_api import NOW, bearer, client, services  # noqa: F401 - the fixture

ADMIN, PLATFORM_ADMIN, OPS_ADMIN, WRITER = "tz-admin-all", "tz-admin-platform", "tz-admin-ops", "tz-writer"
GRANTS: dict[str, Any] = {
    token_hash(ADMIN): {"name": "ops-lead", "teams": ["*"], "role": "admin"},
    token_hash(PLATFORM_ADMIN): {"name": "platform-lead", "teams": ["platform"], "role": "admin"},
    token_hash(OPS_ADMIN): {"name": "ops-team-lead", "teams": ["ops"], "role": "admin"},
    token_hash(WRITER): {"name": "support-bot", "teams": ["platform"], "role": "write"},
}


def _nights(s: Services) -> tuple[str, str]:
    s.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
    first = run_night(s, NightRequest(now=NOW, teams=["platform"]))
    second = run_night(s, NightRequest(now=NOW + timedelta(hours=73), teams=["platform"]))
    assert first.ok and second.ok
    return first.run.id, second.run.id


def test_an_admin_undoes_a_run_over_the_api_and_others_may_not(services: Services) -> None:  # noqa: F811
    first, second = _nights(services)
    c = client(services, tokens=GRANTS)
    listed = c.get("/v1/runs", headers=bearer(PLATFORM_ADMIN)).json()
    assert [r["run_id"] for r in listed] == [second, first] and {r["state"] for r in listed} == {"undoable"}

    assert c.post(f"/v1/runs/{second}/undo", json={"reason": "x"}, headers=bearer(WRITER)).status_code == 403
    other = c.post(f"/v1/runs/{second}/undo", json={"reason": "x"}, headers=bearer(OPS_ADMIN))
    assert other.status_code == 404 and "platform" not in other.text  # another team's run does not exist for it
    assert c.get("/v1/runs", headers=bearer(OPS_ADMIN)).json() == []

    refused = c.post(f"/v1/runs/{first}/undo", json={"reason": "wrong beliefs"}, headers=bearer(PLATFORM_ADMIN))
    assert refused.status_code == 409 and second in refused.json()["error"]["message"]

    dry = c.post(f"/v1/runs/{second}/undo", json={"reason": "check", "dry_run": True}, headers=bearer(ADMIN)).json()
    assert dry["dry_run"] and dry["texts"] > 0
    assert services.graph.counts("platform").episodes.get("retired", 0) == dry["texts"]

    done = c.post(f"/v1/runs/{second}/undo", json={"reason": "wrong beliefs"}, headers=bearer(PLATFORM_ADMIN))
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["undone"] == [second] and body["texts"] == dry["texts"] and not body["already"]
    assert services.graph.counts("platform").episodes.get("retired", 0) == 0
    assert services.graph.get_run(second).undone_by == "platform-lead"  # type: ignore[union-attr]
    states = {r["run_id"]: r["state"] for r in c.get("/v1/runs", headers=bearer(ADMIN)).json()}
    assert states == {second: "undone", first: "undoable"}
    again = c.post(f"/v1/runs/{second}/undo", json={"reason": "again"}, headers=bearer(ADMIN)).json()
    assert again["already"]


def test_a_writer_releases_a_wrong_belief_over_the_api(services: Services) -> None:  # noqa: F811
    _nights(services)
    retired = services.graph.episodes_by_status("platform", [EpisodeStatus.RETIRED.value])
    owner = retired[0].absorbed_by
    c = client(services, tokens=GRANTS)
    missing = c.post("/v1/patterns/pat_nope/release", json={"reason": "x"}, headers=bearer(WRITER))
    assert missing.status_code == 404
    no_reason = c.post(f"/v1/patterns/{owner}/release", json={"reason": ""}, headers=bearer(WRITER))
    assert no_reason.status_code == 422
    r = c.post(f"/v1/patterns/{owner}/release", json={"reason": "a status line"}, headers=bearer(WRITER))
    assert r.status_code == 200, r.text
    assert sorted(r.json()["revived"]) == sorted(e.id for e in retired if e.absorbed_by == owner)
    (p,) = services.graph.patterns_by_id([owner or ""])
    assert p.status is PatternStatus.RETIRED and p.archived_by == "support-bot"
