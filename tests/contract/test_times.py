"""Every time the CLI (--json) and the API emit is RFC 3339 in UTC with ``Z``, one format, whatever
offset it was given in (here every clock is +01:00, as --now in Amsterdam is); and the CLI's
``contradictions list --json`` is the API's shape.

Embedded stores, the API through the worker's own app (TestClient), the CLI's ``main`` in this process
on the same data dir (as a second process would attach to the worker's FalkorDB)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.models import iso_time
from taskzilla_sleep.interfaces.cli import main
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.night.pipeline import NightRequest, run_night
from tests.contract.test_api import GRANTS, NOW, READER, TOKEN, WRITER, bearer, client, services

__all__ = ["services"]  # the fixture, imported from test_api

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z")
LOOKS_LIKE_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d")
TIME_KEYS = re.compile(r".*_at|ts|now|time|clock|next_night|first_seen|last_seen|valid_from|valid_to|changed_on")
NIGHT = "2026-11-29T03:05:00+01:00"


def times(data: Any, where: str = "") -> list[tuple[str, str]]:
    """Every (path, value) in ``data`` that is a time: a string under a time-ish key, or any string
    that starts like a date and time."""
    if isinstance(data, dict):
        found = []
        for k, v in data.items():
            if isinstance(v, str) and (TIME_KEYS.fullmatch(k) or LOOKS_LIKE_TIME.match(v)):
                found.append((f"{where}.{k}", v))
            else:
                found += times(v, f"{where}.{k}")
        return found
    if isinstance(data, list):
        return [t for i, v in enumerate(data) for t in times(v, f"{where}[{i}]")]
    return [(where, data)] if isinstance(data, str) and LOOKS_LIKE_TIME.match(data) else []


def assert_one_format(what: str, data: Any) -> int:
    found = times(data)
    bad = [(p, v) for p, v in found if not RFC3339_UTC.fullmatch(v)]
    assert not bad, f"{what}: times not in RFC 3339 UTC 'Z': {bad[:5]}"
    return len(found)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """main() configures logging for the process: put it back for the tests after this one."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)
    structlog.reset_defaults()


def test_iso_time_is_utc_z_for_any_offset() -> None:
    from datetime import datetime

    assert iso_time(datetime.fromisoformat(NIGHT)) == "2026-11-29T02:05:00Z"
    assert iso_time(datetime.fromisoformat("2026-11-29T02:05:00.250+00:00")) == "2026-11-29T02:05:00.250000Z"


def test_cli_json_and_api_times_share_one_format(
    services: Services, tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
    assert run_night(services, NightRequest(now=NOW)).ok
    data_dir = str(services.settings.data_dir)

    def cli(*args: str, code: int = 0) -> Any:
        got = main([*args, "--data-dir", data_dir])
        out = capsys.readouterr().out
        assert got == code, out
        return json.loads(out[out.index("[") if out.lstrip().startswith("[") else out.index("{") :])

    episodes = tmp_path / "more.jsonl"
    episodes.write_text(
        json.dumps({"team": "platform", "channel": "dev", "author": "lea", "text": "we deploy on tuesdays now",
                    "ts": "2026-11-28T18:00:00+01:00", "provenance": "human"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    outputs: dict[str, Any] = {
        "ingest": cli("ingest", str(episodes), "--now", "2026-11-28T20:00:00+01:00", "--json"),
        "run-once": cli("run-once", "--now", NIGHT, "--json"),
        "status": cli("status", "--json"),
        "recall": cli("recall", "deploy on friday", "--now", NIGHT, "--json"),
        "patterns list": cli("patterns", "list", "--team", "platform", "--json"),
        "facts pin": cli("facts", "pin", "Lea is on call", "--by", "lea", "--now", NIGHT, "--json"),
        "facts list": cli("facts", "list", "--json"),
        "contradictions list": cli("contradictions", "list", "--json"),
        "alerts list": cli("alerts", "list", "--json"),
        "reconcile": cli("reconcile", "--check", "--json"),
        "report": cli("report", "--json"),
    }
    pid = outputs["patterns list"][0]["id"]
    outputs["patterns show"] = cli("patterns", "show", pid, "--team", "platform", "--json")
    (view,) = outputs["contradictions list"]
    cid = view["contradiction"]["id"]
    outputs["contradictions resolve"] = cli(
        "contradictions", "resolve", cid, "--keep", "both", "--by", "sara", "--now", NIGHT, "--json"
    )
    total = sum(assert_one_format(f"taskzilla-sleep {cmd} --json", out) for cmd, out in outputs.items())
    assert total >= 50, total
    assert outputs["facts pin"]["created_at"] == "2026-11-29T02:05:00Z"  # given as 03:05 +01:00
    assert outputs["run-once"]["now"] == "2026-11-29T02:05:00Z"

    c = client(services, token=TOKEN, tokens=GRANTS)
    api: dict[str, Any] = {
        "recall": c.get("/v1/recall", params={"q": "deploy on friday"}, headers=bearer(READER)),
        "patterns": c.get("/v1/patterns", headers=bearer(READER)),
        "pattern": c.get(f"/v1/patterns/{pid}", headers=bearer(READER)),
        "contradictions": c.get("/v1/contradictions", params={"status": "resolved"}, headers=bearer(READER)),
        "facts": c.get("/v1/facts", headers=bearer(READER)),
        "alerts": c.get("/v1/alerts", headers=bearer(TOKEN)),
        "status": c.get("/v1/status", headers=bearer(TOKEN)),
        "pin": c.post("/v1/facts", json={"text": "Sara leads platform", "entity": "sara"}, headers=bearer(WRITER)),
    }
    for name, res in api.items():
        assert res.status_code == 200, (name, res.text)
        assert_one_format(f"API {name}", res.json())
    status = api["status"].json()
    assert RFC3339_UTC.fullmatch(status["clock"]) and RFC3339_UTC.fullmatch(status["next_night"])

    # One shape for one object: the CLI's contradiction, fact, pattern and alert are the API's.
    (resolved,) = api["contradictions"].json()
    assert set(resolved) == set(view) == {"contradiction", "old", "new"}
    assert resolved["contradiction"] == outputs["contradictions resolve"]
    assert set(api["facts"].json()[0]) == set(outputs["facts list"][0])
    assert set(api["patterns"].json()[0]) == set(outputs["patterns list"][0])
    assert set(api["pattern"].json()) == set(outputs["patterns show"])
    if outputs["alerts list"]:
        assert set(api["alerts"].json()[0]) == set(outputs["alerts list"][0])
