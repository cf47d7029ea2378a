from __future__ import annotations

import json

import pytest
import structlog

from taskzilla_sleep.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog() -> object:
    yield None
    structlog.reset_defaults()


def test_secrets_are_masked_in_json_logs(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=["s3cr3t-token-value"])
    log = structlog.get_logger("t")
    log.info("connected", api_key="sk-live-123", url="bolt://u:s3cr3t-token-value@host", n=3)
    out = capsys.readouterr().err.strip().splitlines()[-1]
    event = json.loads(out)
    assert event["event"] == "connected" and event["n"] == 3
    assert event["api_key"] == "**********"
    assert "s3cr3t-token-value" not in out and "sk-live-123" not in out
