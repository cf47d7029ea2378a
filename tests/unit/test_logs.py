from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from taskzilla_sleep.core.logs import VENDOR_LOGGERS, adopt_vendor_handlers, configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog() -> object:
    yield None
    structlog.reset_defaults()


SECRET = "s3cr3t-neo4j-password"


@pytest.fixture(autouse=True)
def _restore_stdlib_logging() -> Iterator[None]:
    """configure_logging changes the root logger and the vendor loggers: put them back. (pytest adds
    and removes its own capture handlers on the root around each phase: only ours are removed.)"""
    root = logging.getLogger()
    root_level = root.level
    vendors = [logging.getLogger(name) for name in (*VENDOR_LOGGERS, "LiteLLM Router", "LiteLLM Proxy")]
    saved = [(logger, logger.level, list(logger.handlers), list(logger.filters)) for logger in vendors]
    yield
    logging.captureWarnings(False)  # configure_logging routes warnings.warn to logging: undo it
    for handler in [h for h in root.handlers if type(h).__module__ == "taskzilla_sleep.core.logs"]:
        root.removeHandler(handler)
    root.setLevel(root_level)
    for logger, level, handlers, filters in saved:
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.filters[:] = filters


def test_secrets_are_masked_in_json_logs(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=["s3cr3t-token-value"])
    log = structlog.get_logger("t")
    log.info("connected", api_key="sk-live-123", url="bolt://u:s3cr3t-token-value@host", n=3)
    out = capsys.readouterr().err.strip().splitlines()[-1]
    event = json.loads(out)
    assert event["event"] == "connected" and event["n"] == 3
    assert event["api_key"] == "**********"
    assert "s3cr3t-token-value" not in out and "sk-live-123" not in out


def _json_lines(err: str) -> list[dict[str, object]]:
    lines = err.strip().splitlines()
    return [json.loads(line) for line in lines]


def test_a_secret_in_a_vendor_record_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=[SECRET])
    logging.getLogger("neo4j").warning("auth with %s", SECRET)
    err = capsys.readouterr().err
    assert SECRET not in err
    assert "auth with **********" in err


def test_a_vendor_warning_is_one_json_line_with_level_and_logger(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True)
    logging.getLogger("chromadb.api").warning("collection %s is %d days old", "episodes", 3)
    logging.getLogger("httpx").info("HTTP Request: GET http://x")  # vendors stay at WARNING
    [event] = _json_lines(capsys.readouterr().err)
    assert event["event"] == "collection episodes is 3 days old"
    assert event["level"] == "warning" and event["logger"] == "chromadb.api"
    assert isinstance(event["timestamp"], str) and event["timestamp"].endswith("Z")


def test_a_vendor_exception_is_rendered_without_the_secret(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=[SECRET])
    try:
        raise ConnectionError(f"bolt://neo4j:{SECRET}@db:7687 refused")
    except ConnectionError:
        logging.getLogger("neo4j").exception("connect failed")
    err = capsys.readouterr().err
    [event] = _json_lines(err)
    assert SECRET not in err
    assert event["level"] == "error" and event["logger"] == "neo4j"
    assert "Traceback" in str(event["exception"]) and "bolt://neo4j:**********@db:7687" in str(event["exception"])


def test_our_own_exception_is_masked_too(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=[SECRET])
    try:
        raise RuntimeError(f"password was {SECRET}")
    except RuntimeError:
        structlog.get_logger("t").exception("failed")
    err = capsys.readouterr().err
    assert SECRET not in err and "password was **********" in err


def test_configuring_twice_adds_no_second_handler(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=True, secrets=["first-secret"])
    configure_logging(level="info", json=True, secrets=[SECRET])
    logging.getLogger("urllib3").warning("retrying %s", SECRET)
    [event] = _json_lines(capsys.readouterr().err)
    assert event["event"] == "retrying **********"


def test_vendor_lines_follow_a_swapped_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_logging(level="info", json=True)
    swapped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", swapped)
    logging.getLogger("neo4j").warning("pool full")
    assert json.loads(swapped.getvalue())["event"] == "pool full"


def test_vendor_lines_are_console_lines_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(level="info", json=False, secrets=[SECRET])
    logging.getLogger("neo4j").warning("auth with %s", SECRET)
    err = capsys.readouterr().err
    assert SECRET not in err and "auth with **********" in err and "neo4j" in err and "warn" in err


def test_litellm_own_handler_is_replaced_and_its_filters_kept(capsys: pytest.CaptureFixture[str]) -> None:
    """LiteLLM attaches a plain-text stream handler with a redacting filter when it is imported."""

    class Redact(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            record.msg = str(record.msg).replace("sk-live-key", "[REDACTED]")
            return True

    own_output = io.StringIO()
    litellm_handler = logging.StreamHandler(own_output)
    litellm_handler.addFilter(Redact())
    logging.getLogger("LiteLLM").addHandler(litellm_handler)

    configure_logging(level="info", json=True)
    adopt_vendor_handlers()  # what the litellm import sites call
    logging.getLogger("LiteLLM").warning("retrying with sk-live-key")
    [event] = _json_lines(capsys.readouterr().err)
    assert own_output.getvalue() == ""
    assert event["event"] == "retrying with [REDACTED]" and event["logger"] == "LiteLLM"


def test_a_python_warning_is_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The neo4j driver reports server notifications and deprecations with warnings.warn: those go
    through the same JSON handler (masked), not as plain text straight to stderr."""
    import warnings

    configure_logging(level="warning", json=True, secrets=[SECRET])
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"notification from the server about {SECRET}", UserWarning, stacklevel=1)
    [event] = _json_lines(capsys.readouterr().err)
    assert event["logger"] == "py.warnings" and event["level"] == "warning"
    assert "UserWarning: notification from the server about **********" in str(event["event"])
    assert SECRET not in json.dumps(event)
