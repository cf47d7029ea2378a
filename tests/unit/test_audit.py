"""The audit trail's file and its copy in the log stream: one whole JSON line per decision, read back
newest first with filters, visible by team, written whatever the log level, never a secret."""

from __future__ import annotations

import json
import logging
import multiprocessing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from taskzilla_sleep.core.logs import VENDOR_LOGGERS, configure_logging
from taskzilla_sleep.rules.access import OPEN, Access
from taskzilla_sleep.service import audit_trail as audit
from taskzilla_sleep.service.audit_trail import AUDIT_FILE, AuditLog, AuditRecord
from taskzilla_sleep.service.memory_service import audit as service_audit

DANA = Access(name="dana", teams=frozenset({"platform"}), role="write")
PLATFORM_ADMIN = Access(name="lead", teams=frozenset({"platform"}), role="admin")


@pytest.fixture
def trail(tmp_path: Path) -> Iterator[AuditLog]:
    sink = audit.install(AuditLog(tmp_path / AUDIT_FILE))
    try:
        yield sink
    finally:
        audit.uninstall(sink)


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """Logging configured as `--log-level error` does it; put back afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    vendors = [(logging.getLogger(n), logging.getLogger(n).level) for n in VENDOR_LOGGERS]
    configure_logging(level="error", json=True, secrets=["tz-secret-token-value"])
    yield
    structlog.reset_defaults()
    logging.captureWarnings(False)
    root.handlers[:] = handlers
    root.setLevel(level)
    for logger, lv in vendors:
        logger.setLevel(lv)


def lines(sink: AuditLog) -> list[dict[str, object]]:
    return [json.loads(x) for x in sink.path.read_text(encoding="utf-8").splitlines()]


def test_a_decision_is_one_json_line_in_the_file_and_an_audit_event_in_the_log_stream_at_any_level(
    trail: AuditLog, quiet_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    structlog.get_logger("t").info("not_shown_at_error_level")
    service_audit(DANA, "resolve", "platform", ["con_1"], keep="new", note="checked with Martin")
    (line,) = lines(trail)
    assert line["who"] == "dana" and line["role"] == "write" and line["action"] == "resolve"
    assert (line["team"], line["n"], line["ids"], line["keep"], line["note"]) == (
        "platform",
        1,
        ["con_1"],
        "new",
        "checked with Martin",
    )
    assert datetime.fromisoformat(str(line["at"])) > datetime.now(UTC) - timedelta(minutes=1)
    err = capsys.readouterr().err
    events = [json.loads(x) for x in err.strip().splitlines()]
    assert [e["event"] for e in events] == ["audit"]  # the info line above is filtered, the audit is not
    assert events[0]["who"] == "dana" and events[0]["action"] == "resolve" and events[0]["ids"] == ["con_1"]


def test_no_secret_reaches_the_file(trail: AuditLog, quiet_logs: None) -> None:
    service_audit(OPEN, "export", "platform", api_token="tz-secret-token-value", to="file with tz-secret-token-value")
    raw = trail.path.read_text(encoding="utf-8")
    assert "tz-secret-token-value" not in raw
    assert lines(trail)[0]["api_token"] == "**********"


def test_a_long_list_of_ids_is_counted_and_cut(trail: AuditLog) -> None:
    ids = [f"ep_{i}" for i in range(500)]
    service_audit(OPEN, "ingest", "platform", ids)
    (line,) = lines(trail)
    assert line["n"] == 500 and line["ids"] == ids[: audit.MAX_IDS]


def _append(path: str, who: str, n: int) -> None:
    sink = AuditLog(Path(path))
    for i in range(n):
        sink.write(
            AuditRecord(at=datetime.now(UTC), who=who, role="admin", action="ingest", team="t", ids=["x" * 3000], n=i)
        )


def test_processes_appending_at_once_never_interleave_a_line(tmp_path: Path) -> None:
    path = str(tmp_path / AUDIT_FILE)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(path, f"p{k}", 150)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    got = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()]  # each line whole
    assert len(got) == 600
    for k in range(4):
        assert [r["n"] for r in got if r["who"] == f"p{k}"] == list(range(150))  # each writer's order kept


def test_read_is_newest_first_with_filters_and_a_limit(tmp_path: Path) -> None:
    sink = AuditLog(tmp_path / AUDIT_FILE)
    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    for i, (action, team) in enumerate(
        [("ingest", "platform"), ("pin", "platform"), ("resolve", "ops"), ("forget", "platform"), ("pin", "ops")]
    ):
        sink.write(AuditRecord(at=t0 + timedelta(minutes=i), who=f"w{i}", role="write", action=action, team=team))
    assert [r.who for r in sink.read()] == ["w4", "w3", "w2", "w1", "w0"]
    assert [r.who for r in sink.read(limit=2)] == ["w4", "w3"]
    assert [r.who for r in sink.read(team="platform")] == ["w3", "w1", "w0"]
    assert [r.who for r in sink.read(action="pin")] == ["w4", "w1"]
    assert [r.who for r in sink.read(since=t0 + timedelta(minutes=2))] == ["w4", "w3", "w2"]
    assert sink.read(team="platform", action="resolve") == []


def test_a_one_team_admin_sees_only_its_teams_records(tmp_path: Path) -> None:
    sink = AuditLog(tmp_path / AUDIT_FILE)
    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    for i, team in enumerate(["platform", "ops", "platform,ops", None]):
        sink.write(AuditRecord(at=t0 + timedelta(minutes=i), who=f"w{i}", role="admin", action="ingest", team=team))
    assert [r.team for r in sink.read(access=PLATFORM_ADMIN)] == ["platform"]
    assert [r.team for r in sink.read(access=OPEN)] == [None, "platform,ops", "ops", "platform"]
    assert [r.team for r in sink.read(team="ops")] == ["platform,ops", "ops"]


def test_a_cut_or_foreign_line_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    sink = AuditLog(tmp_path / AUDIT_FILE)
    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    sink.write(AuditRecord(at=t0, who="a", role="admin", action="pin", team="platform"))
    with sink.path.open("a", encoding="utf-8") as f:
        f.write('not json\n{"who": "no time"}\n')
    sink.write(AuditRecord(at=t0 + timedelta(minutes=1), who="b", role="admin", action="pin", team="platform"))
    with sink.path.open("a", encoding="utf-8") as f:
        f.write('{"at": "2026-12-01T09:05:00Z", "who": "cut by a cra')  # a crash mid-line
    assert [r.who for r in sink.read()] == ["b", "a"]
    assert AuditLog(tmp_path / "none.jsonl").read() == []


def test_without_an_installed_sink_a_decision_still_reaches_the_log_stream() -> None:
    assert audit.current() is None
    with structlog.testing.capture_logs() as logs:
        service_audit(DANA, "pin", "platform", ["fact_1"])
    assert [(e["event"], e["who"], e["ids"]) for e in logs] == [("audit", "dana", ["fact_1"])]
