"""The run ledger, the alert outbox and the lease in memory: the same behaviour as ``stores/cypher``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from taskzilla_sleep.core.models import EPISODE_LIVE, STEP_DONE, Contradiction, ContradictionStatus, Run
from taskzilla_sleep.stores.memory.beliefs import MemoryBeliefs
from taskzilla_sleep.stores.ports import AlertRecord, AlertStatus, IngestMark, LeaseClaim, LeaseState, PatternUpdate
from taskzilla_sleep.stores.records import MARK_KEPT_MS


def _night(run: Run) -> str:
    """The night a run belongs to, as the ``night_runs`` query keys it (``nights.night_key``)."""
    return run.slot if run.slot is not None else f"run:{run.id}"


def _ok(run: Run) -> bool:
    return all(s.status in STEP_DONE for s in run.steps) and run.finished_at is not None


class MemoryOps(MemoryBeliefs):
    # -- the run ledger --------------------------------------------------------------------------
    def save_run(self, run: Run) -> None:
        with self._lock:
            self._maybe_fail()
            self.run_ledger[run.id] = run.model_copy(deep=True)  # the caller goes on changing its own

    def get_run(self, run_id: str) -> Run | None:
        with self._lock:
            run = self.run_ledger.get(run_id)
            return run.model_copy(deep=True) if run is not None else None

    def runs(self, n: int, teams: Sequence[str] | None = None) -> list[Run]:
        with self._lock:
            mine = (r for r in self.run_ledger.values() if teams is None or (r.team is not None and r.team in teams))
            found = sorted(mine, key=lambda r: r.started_at, reverse=True)[:n]
            return [r.model_copy(deep=True) for r in found]

    def night_runs(self, n: int) -> list[Run]:
        with self._lock:
            real = [r for r in self.run_ledger.values() if not r.dry_run]
            first: dict[str, datetime] = {}
            for r in real:
                key = _night(r)
                first[key] = min(first.get(key, r.started_at), r.started_at)
            newest = set(sorted(first, key=lambda k: (first[k], k), reverse=True)[:n])
            found = sorted((r for r in real if _night(r) in newest), key=lambda r: r.started_at, reverse=True)
            return [r.model_copy(deep=True) for r in found]

    def slot_done(self, slot: str) -> bool:
        with self._lock:
            return any(r.slot == slot and _ok(r) for r in self.run_ledger.values())

    def slot_runs(self, slot: str, team: str | None = None) -> list[Run]:
        with self._lock:
            mine = [r for r in self.run_ledger.values() if r.slot == slot and (team is None or r.team in (None, team))]
            found = sorted(mine, key=lambda r: r.started_at)
            return [r.model_copy(deep=True) for r in found]

    def abandon_dead_runs(self, by: str, team: str | None = None) -> list[str]:
        marked: list[str] = []
        for run in self.runs(len(self.run_ledger)):
            dead = run.abandoned(by) if team is None or run.team == team else None
            if dead is not None:
                self.save_run(dead)
                marked.append(dead.id)
        return marked

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            return self.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._maybe_fail()
            self.meta[key] = value

    def finish_journal(self, key: str, value: str, journal: str) -> None:
        with self._lock:
            self._maybe_fail()
            self.meta[key] = value
            self.meta[journal] = ""

    def update_patterns_and_meta(self, updates: Sequence[PatternUpdate], key: str, value: str) -> None:
        with self._lock:
            self.update_patterns(updates)
            self.meta[key] = value

    # -- the alert outbox ------------------------------------------------------------------------
    def queue_alerts(self, alerts: Sequence[AlertRecord]) -> None:
        with self._lock:
            self._maybe_fail()
            for a in alerts:
                cid = a.contradiction_id
                if a.key in self.outbox or (cid is not None and cid not in self.contradiction_nodes):
                    continue
                self.outbox[a.key] = a
                if cid is not None:
                    self.alert_for.add((a.key, cid))

    def withdraw_alerts(self, keys: Sequence[str], suffix: str, reason: str) -> None:
        with self._lock:
            self._maybe_fail()
            for key in keys:
                a = self.outbox.pop(key, None)
                if a is None:
                    continue
                changes: dict[str, object] = {"key": key + suffix}
                if a.status == "pending":
                    changes |= {"status": "dropped", "dropped_reason": reason}
                self.outbox[key + suffix] = a.model_copy(update=changes)
                self.alert_for = {(key + suffix if k == key else k, c) for k, c in self.alert_for}

    def alerted_open_contradictions(self) -> list[tuple[Contradiction, frozenset[str]]]:
        with self._lock:
            channels: dict[str, set[str]] = {}
            for key, cid in self.alert_for:
                channels.setdefault(cid, set()).add(self.outbox[key].channel)
            found = self.contradictions(status=ContradictionStatus.OPEN.value)
            return [(c, frozenset(channels.get(c.id, ()))) for c in found]

    def claim_alert(self, channel: str, now: datetime, until: datetime) -> AlertRecord | None:
        with self._lock:
            self._maybe_fail()
            due = [a for a in self.outbox.values() if a.status == "pending" and a.channel == channel]
            due = sorted((a for a in due if a.next_attempt_at <= now), key=lambda a: (a.next_attempt_at, a.key))
            if not due:
                return None
            claimed = self.outbox[due[0].key] = due[0].model_copy(update={"next_attempt_at": until})
            return claimed

    def mark_alert_delivered(self, key: str, now: datetime, message_ref: str | None = None) -> bool:
        with self._lock:
            self._maybe_fail()
            a = self.outbox.get(key)
            if a is None or a.status != "pending":
                return False
            self.outbox[key] = a.model_copy(
                update={
                    "status": "delivered",
                    "delivered_at": now,
                    "last_attempt_at": now,
                    "attempts": a.attempts + 1,
                    "last_error": None,
                    "message_ref": message_ref,
                }
            )
            return True

    def mark_alert_dropped(self, key: str, reason: str) -> bool:
        with self._lock:
            self._maybe_fail()
            a = self.outbox.get(key)
            if a is None or a.status != "pending":
                return False
            self.outbox[key] = a.model_copy(update={"status": "dropped", "dropped_reason": reason})
            return True

    def mark_alert_failed(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        with self._lock:
            self._maybe_fail()
            a = self.outbox.get(key)
            if a is None or a.status != "pending":
                return False
            self.outbox[key] = a.model_copy(
                update={
                    "attempts": a.attempts + 1,
                    "last_attempt_at": now,
                    "last_error": error,
                    "next_attempt_at": next_at,
                    "status": "failed" if give_up else "pending",
                }
            )
            return True

    def defer_alerts(self, channel: str, until: datetime) -> int:
        with self._lock:
            moved = [
                a
                for a in self.outbox.values()
                if a.status == "pending" and a.channel == channel and a.next_attempt_at < until
            ]
            for a in moved:
                self.outbox[a.key] = a.model_copy(update={"next_attempt_at": until})
            return len(moved)

    def requeue_failed_alerts(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        with self._lock:
            failed = [a for a in self.outbox.values() if a.status == "failed" and (keys is None or a.key in keys)]
            for a in failed:
                self.outbox[a.key] = a.model_copy(
                    update={"status": "pending", "attempts": 0, "next_attempt_at": now, "last_error": None}
                )
            return len(failed)

    def alerts(self, status: AlertStatus | None = None) -> list[AlertRecord]:
        with self._lock:
            found = [a for a in self.outbox.values() if status is None or a.status == status]
        return sorted(found, key=lambda a: (a.created_at, a.key))

    def count_alerts(self, status: AlertStatus) -> int:
        return len(self.alerts(status))

    def oldest_alert_at(self, status: AlertStatus) -> datetime | None:
        return min((a.created_at for a in self.alerts(status)), default=None)

    # -- the lease -------------------------------------------------------------------------------
    def try_lease(self, name: str, claim: LeaseClaim, now_ms: int, ttl_ms: int, dead_holder: str | None) -> bool:
        with self._lock:
            self._maybe_fail()
            state = self.leases.setdefault(name, LeaseState(holder=None, expires_at_ms=0))
            free = state.holder is None or state.holder == claim.holder or state.expires_at_ms < now_ms
            if not (free or (dead_holder is not None and state.holder == dead_holder)):
                return False
            self.leases[name] = LeaseState(claim.holder, now_ms + ttl_ms, claim.host, claim.pid_ns, claim.pid)
            return True

    def release_lease(self, name: str, holder: str) -> None:
        with self._lock:
            state = self.leases.get(name)
            if state is not None and state.holder == holder:
                self.leases[name] = LeaseState(None, 0, state.host, state.pid_ns, state.pid)

    def lease_state(self, name: str) -> LeaseState | None:
        with self._lock:
            return self.leases.get(name)

    # -- ingests in flight -----------------------------------------------------------------------
    def mark_ingest(self, mark: IngestMark) -> None:
        with self._lock:
            self._maybe_fail()
            self.marks[mark.id] = mark
            if mark.ended:
                old = int(time.time() * 1000) - MARK_KEPT_MS
                self.marks = {k: m for k, m in self.marks.items() if m.expires_at_ms >= old}

    def ingest_marks(self, since_ms: int) -> list[IngestMark]:
        with self._lock:
            return sorted((m for m in self.marks.values() if m.expires_at_ms >= since_ms), key=lambda m: m.id)

    def ingest_episodes(self, team: str, ingests: Sequence[str]) -> set[str]:
        wanted = set(ingests)
        with self._lock:
            return {
                i
                for i, e in self.episode_nodes.items()
                if e.team == team and e.status in EPISODE_LIVE and self.ingest_of.get(i) in wanted
            }
