"""Console sessions and the chat requests already taken, in the graph (shared by every replica)."""

from __future__ import annotations

from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import SessionRecord

Q = queries.load("sessions")


def _props(s: SessionRecord) -> Row:
    return {
        "key": s.key,
        "name": s.name,
        "teams": s.teams,
        "role": s.role,
        "csrf": s.csrf,
        "created_at": s.created_ms,
        "last_seen": s.last_seen_ms,
        **({"notices": list(s.notices)} if s.notices else {}),
    }


def _session(p: Row, notices: object) -> SessionRecord:
    return SessionRecord(
        key=str(p["key"]),
        name=str(p["name"]),
        teams=str(p["teams"]),
        role=str(p["role"]),
        csrf=str(p["csrf"]),
        created_ms=int(p["created_at"]),
        last_seen_ms=int(p["last_seen"]),
        notices=tuple(str(n) for n in notices) if isinstance(notices, list) else (),
    )


class CypherSessions(CypherBase):
    def start_session(self, session: SessionRecord, idle_before_ms: int, keep: int) -> None:
        self._write(Q["purge_idle_sessions"], {"idle_before": idle_before_ms})
        self._write(Q["trim_sessions"], {"keep": max(0, keep)})
        self._write(Q["create_session"], {"props": _props(session)})

    def touch_session(self, key: str, now_ms: int, idle_before_ms: int, take_notices: bool) -> SessionRecord | None:
        params = {"key": key, "now": now_ms, "idle_before": idle_before_ms, "take": take_notices}
        rows = self._write(Q["touch_session"], params)
        if not rows:
            return None
        return _session(rows[0]["s"], rows[0]["notices"])

    def add_session_notice(self, key: str, notice: str, keep: int) -> None:
        self._write(Q["add_session_notice"], {"key": key, "notice": notice, "keep": keep})

    def end_session(self, key: str) -> None:
        self._write(Q["end_session"], {"key": key})

    def remember_request(self, key: str, now_ms: int, until_ms: int) -> bool:
        rows = self._write(Q["remember_request"], {"key": key, "now": now_ms, "until": until_ms})
        self._write(Q["forget_requests"], {"now": now_ms})
        return bool(rows) and int(rows[0]["fresh"]) > 0
