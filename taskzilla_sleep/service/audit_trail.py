"""The audit trail: every decision made through the product, by whom, on record.

One JSON object a line in ``DATA_DIR/audit.jsonl``, and the same event (``audit``) in the log stream
whatever ``--log-level`` says. A record says when (UTC), who (an API token's name, ``cli:NAME`` on
the command line, ``slack:U123 (alice)`` or ``telegram:42 (@bob)`` in chat), its role, the action
(resolve, pin, unpin, forget, requeue_alert, export, import, ingest, ...), the team, how many ids and
the first ``MAX_IDS`` of them, and what the action adds (keep, note, reason...). Never a token: each
record passes the log stream's masker before it is written.

Each record is one ``write`` to a file opened with ``O_APPEND``, then fsync'd: the worker and a
command line appending at once never interleave their lines, and a record is on disk before the
caller answers. The file is not rotated (a record is a few hundred bytes; an ingest by the bot is one
record per call): an operator who wants to cut it moves it away, and the next record starts a new
one. The trail is written by whichever process decides: replicas that should show one trail share
``DATA_DIR`` (or collect the ``audit`` events of the log stream).

The sink is set once per process by ``app.build`` (as logging is configured once), so every caller,
``service.audit`` and the command line alike, writes to the data folder of the stores it opened.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from taskzilla_sleep.core.logs import audit_logger, masked
from taskzilla_sleep.rules.access import Access

log = structlog.get_logger(__name__)

AUDIT_FILE = "audit.jsonl"
EVENT = "audit"
MAX_IDS = 50  # ids listed in a record (``n`` counts them all)
CLOCK_SKEW = timedelta(minutes=5)  # records of several processes are in time order up to this
_BLOCK = 1 << 16
# What the product records (the filter's suggestions; any name is accepted).
ACTIONS = (
    "resolve",
    "resolve_refused",
    "pin",
    "unpin",
    "forget",
    "requeue_alert",
    "ingest",
    "export",
    "import",
    "undo",
    "release",
)
ACTION_RE = r"^[a-z][a-z_]{0,47}$"
_RESERVED = frozenset({"at", "who", "role", "action", "team", "n", "ids", "event", "level", "timestamp"})


class AuditRecord(BaseModel):
    """One decision. The action's own fields (keep, note, reason, ...) are kept as extra fields."""

    model_config = ConfigDict(extra="allow", frozen=True)

    at: datetime
    who: str
    role: str
    action: str
    team: str | None = None  # several teams of one ingest: "a,b"
    n: int = 0
    ids: list[str] = []

    @property
    def teams(self) -> list[str]:
        return [t for t in (self.team or "").split(",") if t]

    @property
    def details(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def visible_to(self, access: Access) -> bool:
        """An admin of every team sees every record; another admin only those of its own teams."""
        return access.teams is None or (bool(self.teams) and all(access.sees(t) for t in self.teams))


class AuditLog:
    """The trail's file: appended one record at a time, read newest first."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, record: AuditRecord) -> None:
        """Append ``record`` as one line, in one write, and fsync it. OSError when it cannot be."""
        data = record.model_dump(mode="json")
        line = json.dumps(dict(masked(data)), ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        raw = line.encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        try:
            if os.write(fd, raw) != len(raw):  # a short write (disk full): the line is cut
                raise OSError(f"{self.path}: only part of an audit record was written")
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(
        self,
        *,
        access: Access | None = None,
        team: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[AuditRecord]:
        """The newest ``limit`` records that match (and that ``access`` may see), newest first. A line
        that is not a record (cut by a crash, edited by hand) is skipped and logged."""
        out: list[AuditRecord] = []
        if not self.path.exists():
            return out
        for offset, line in _lines_newest_first(self.path):
            try:
                r = AuditRecord.model_validate_json(line)
            except ValidationError:
                log.warning("audit_line_unreadable", path=str(self.path), offset=offset)
                continue
            if since is not None and r.at < since - CLOCK_SKEW:
                break  # older records follow
            if (
                (since is None or r.at >= since)
                and (team is None or team in r.teams)
                and (action is None or r.action == action)
                and (access is None or r.visible_to(access))
            ):
                out.append(r)
                if len(out) >= limit:
                    break
        return out


def _lines_newest_first(path: Path) -> Iterator[tuple[int, bytes]]:
    """Each non-blank line of the file with its offset, from the last to the first, read backwards
    in blocks (a long trail is not read whole to show its newest records)."""
    with path.open("rb") as f:
        end = f.seek(0, os.SEEK_END)
        rest = b""  # the start of the block read before: the bytes [end, end + len(rest))
        while end > 0:
            start = max(0, end - _BLOCK)
            f.seek(start)
            first, *lines = (f.read(end - start) + rest).split(b"\n")
            at = start + len(first) + 1
            found = []
            for line in lines:
                found.append((at, line))
                at += len(line) + 1
            for at, line in reversed(found):
                if line.strip():
                    yield at, line
            rest, end = first, start  # ``first`` may begin in the block before
        if rest.strip():
            yield 0, rest


_lock = threading.Lock()
_sinks: list[AuditLog] = []  # the last installed is the one written to


def install(sink: AuditLog) -> AuditLog:
    """Write this process's audit records to ``sink`` (``app.build`` does, for its data folder)."""
    with _lock:
        _sinks.append(sink)
    return sink


def uninstall(sink: AuditLog) -> None:
    """Stop writing to ``sink``; the one installed before it (if any) is used again."""
    with _lock:
        for i in range(len(_sinks) - 1, -1, -1):
            if _sinks[i] is sink:
                del _sinks[i]
                break


def current() -> AuditLog | None:
    with _lock:
        return _sinks[-1] if _sinks else None


def record(access: Access, action: str, team: str | None, ids: Sequence[str] = (), **extra: object) -> AuditRecord:
    """Put one decision on record: in the file of the installed sink and in the log stream (always,
    whatever the log level). A file that cannot be written is logged as an error; the decision, made
    already, stands."""
    clean = {k if k not in _RESERVED else f"{k}_": v for k, v in extra.items()}
    r = AuditRecord(
        at=datetime.now(UTC),
        who=access.name,
        role=access.role,
        action=action,
        team=team,
        n=len(ids),
        ids=list(ids[:MAX_IDS]),
        **clean,
    )
    audit_logger().info(EVENT, who=r.who, role=r.role, action=action, team=team, n=r.n, ids=r.ids, **clean)
    sink = current()
    if sink is not None:
        try:
            sink.write(r)
        except OSError as exc:
            log.error("audit_write_failed", path=str(sink.path), error=str(exc)[:200], action=action, who=r.who)
    return r
