"""Console sessions and the chat requests already taken, in memory: the same behaviour as ``stores/cypher``."""

from __future__ import annotations

import dataclasses

from taskzilla_sleep.stores.memory.base import MemoryBase
from taskzilla_sleep.stores.ports import SessionRecord


class MemorySessions(MemoryBase):
    def start_session(self, session: SessionRecord, idle_before_ms: int, keep: int) -> None:
        with self._lock:
            self._maybe_fail()
            live = sorted(
                (s for s in self.session_nodes.values() if s.last_seen_ms >= idle_before_ms),
                key=lambda s: s.last_seen_ms,
                reverse=True,
            )
            self.session_nodes = {s.key: s for s in live[: max(0, keep)]}
            self.session_nodes[session.key] = session

    def touch_session(self, key: str, now_ms: int, idle_before_ms: int, take_notices: bool) -> SessionRecord | None:
        with self._lock:
            self._maybe_fail()
            s = self.session_nodes.get(key)
            if s is None or s.last_seen_ms < idle_before_ms:
                return None
            kept = () if take_notices else s.notices
            self.session_nodes[key] = dataclasses.replace(s, last_seen_ms=now_ms, notices=kept)
            return dataclasses.replace(s, last_seen_ms=now_ms)

    def add_session_notice(self, key: str, notice: str, keep: int) -> None:
        with self._lock:
            s = self.session_nodes.get(key)
            if s is not None:
                notices = (*s.notices, notice)
                self.session_nodes[key] = dataclasses.replace(s, notices=notices[max(0, len(notices) - keep) :])

    def end_session(self, key: str) -> None:
        with self._lock:
            self.session_nodes.pop(key, None)

    def remember_request(self, key: str, now_ms: int, until_ms: int) -> bool:
        with self._lock:
            self._maybe_fail()
            until = self.seen_requests.get(key)
            fresh = until is None or until < now_ms
            if fresh:
                self.seen_requests[key] = until_ms
            self.seen_requests = {k: u for k, u in self.seen_requests.items() if u >= now_ms}
            return fresh
