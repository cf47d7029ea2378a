"""What a bot may do with the memory, whatever the transport (HTTP API, MCP): each operation checks
the caller's :class:`~taskzilla_sleep.rules.access.Access` (role and team) and every write is put on
record by :func:`audit` (who, what, which team and ids: ``DATA_DIR/audit.jsonl`` and the log
stream). Person-facing decisions record the caller's token name as ``by``.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import IO, TYPE_CHECKING, Literal

import structlog
from pydantic import BaseModel

from taskzilla_sleep.alerts.admin import AlertView, RequeueReport, StatusFilter, list_alerts, requeue_alerts
from taskzilla_sleep.core.errors import BadRequest, NotFound, UnknownTeam
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.models import Contradiction, EpisodeIn, Pattern, PatternStatus, Time
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.memory import contradictions
from taskzilla_sleep.memory import facts as fact_book
from taskzilla_sleep.memory.admin import (
    ForgetReport,
    PatternDetail,
    PatternSummary,
    export_team,
    forget_author,
    forget_episode,
    forget_pattern,
    list_patterns,
    show_pattern,
)
from taskzilla_sleep.memory.ingest import Ingestor, IngestReport
from taskzilla_sleep.memory.recall import RecallItem, recall
from taskzilla_sleep.rules.access import Access
from taskzilla_sleep.rules.resolution import Keep
from taskzilla_sleep.service import audit_trail as trail
from taskzilla_sleep.stores.ports import GraphStore, VectorStore

if TYPE_CHECKING:
    from taskzilla_sleep.memory.archive import ReleaseReport, UndoReport
    from taskzilla_sleep.observe.report.model import Report

log = structlog.get_logger(__name__)

UndoState = Literal["undoable", "undone", "purged", "nothing"]


class RunUndo(BaseModel):
    """A run as the undo list shows it: ``nothing`` when it changed nothing (or ran without the archive)."""

    run_id: str
    trigger: str
    now: Time
    started_at: Time
    teams: list[str]
    state: UndoState
    undone_at: Time | None = None
    undone_by: str | None = None


class ContradictionView(BaseModel):
    """A contradiction with the text of both beliefs."""

    contradiction: Contradiction
    old: str | None
    new: str | None


class IngestGate:
    """Counts ingests in flight, so a night in the same process can wait for them: an ingest between
    its graph write and its vectors is not drift."""

    def __init__(self) -> None:
        self._busy = 0
        self._quiet = False  # a reconcile is looking: new ingests wait (it takes milliseconds to seconds)
        self._idle = threading.Condition()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._idle:
            self._idle.wait_for(lambda: not self._quiet)
            self._busy += 1
        try:
            yield
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    @contextmanager
    def quiet(self, timeout_s: float = 120.0) -> Iterator[None]:
        """No ingest runs inside: waits for those in flight (up to ``timeout_s``), holds new ones back
        until the body is done. Held around the reconcile that repairs drift, so an ingest between
        its graph write and its vectors is never taken for drift and embedded twice."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._busy == 0 and not self._quiet, timeout=timeout_s):
                log.warning("ingest_still_running", in_flight=self._busy, waited_s=timeout_s)
            self._quiet = True
        try:
            yield
        finally:
            with self._idle:
                self._quiet = False
                self._idle.notify_all()

    @property
    def busy(self) -> int:
        return self._busy


def audit(access: Access, action: str, team: str | None, ids: Sequence[str] = (), **extra: object) -> None:
    """Put a decision on record: the audit file of this process's data folder and the log stream,
    whatever the log level (``taskzilla_sleep.service.audit_trail``)."""
    trail.record(access, action, team, ids, **extra)


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        graph: GraphStore,
        vectors: VectorStore,
        ingestor: Ingestor,
        clock: Callable[[], datetime],
        on_ingest: Callable[[], None] = lambda: None,
        gate: IngestGate | None = None,
        exclusive: Callable[[], AbstractContextManager[None]] = nullcontext,
        instruments: Instruments | None = None,
        recall_pool: Executor | None = None,
    ) -> None:
        self.settings = settings
        self.graph = graph
        self.vectors = vectors
        self.ingestor = ingestor
        self.clock = clock
        self.on_ingest = on_ingest
        self.gate = gate or IngestGate()
        # Held around a forget: the worker passes the consolidation lease, so a forget never
        # lands in the middle of a night (or raises Busy after a bounded wait).
        self.exclusive = exclusive
        self.instruments = instruments  # recall latency for /metrics (None: not timed)
        self.recall_pool = recall_pool  # Services.recall_pool (None: each recall makes its own)

    def team(self, access: Access, wanted: str | None) -> str:
        """The team a read is about; the caller must see it."""
        team = access.team_for(wanted, self.settings.api.default_team)
        access.require("read", team)
        return team

    def _known(self, access: Access, team: str) -> None:
        """An empty read of a team with no data at all that nothing configures: UnknownTeam, naming the
        nearest team among those this caller sees (never another's)."""
        configured = {self.settings.api.default_team, *(access.teams or ())}
        configured |= {t for ch in self.settings.alerts.channels.values() for t in ch.teams}
        if team not in configured:
            require_known_team(self.graph, team, self.teams(access))

    # -- reads ------------------------------------------------------------------------------------
    def recall(
        self,
        access: Access,
        team: str | None,
        query: str,
        *,
        entity: str | None = None,
        k: int = 5,
        include_drafts: bool = False,
        include_superseded: bool = False,
    ) -> list[RecallItem]:
        scope = self.team(access, team)
        timer = self.instruments.recall_duration.time() if self.instruments is not None else nullcontext()
        with timer:
            found = recall(
                self.graph,
                self.vectors,
                query,
                self.clock(),
                teams=[scope],
                entity=entity,
                k=k,
                include_drafts=include_drafts,
                include_superseded=include_superseded,
                min_similarity=self.settings.recall.min_similarity,
                pool=self.recall_pool,
            )
        if not found:
            self._known(access, scope)
        return found

    def patterns(
        self, access: Access, team: str | None, status: PatternStatus | None, limit: int, offset: int
    ) -> list[PatternSummary]:
        scope = self.team(access, team)
        found = list_patterns(self.graph, scope, status, limit, offset)
        if not found and offset == 0:
            self._known(access, scope)
        return found

    def pattern(self, access: Access, team: str | None, pattern_id: str) -> PatternDetail:
        return show_pattern(self.graph, self.team(access, team), pattern_id)

    def contradictions(self, access: Access, team: str | None, status: str = "open") -> list[ContradictionView]:
        scope = self.team(access, team)
        found = self._views(self.graph.contradictions(scope, status))
        if not found:
            self._known(access, scope)
        return found

    def contradiction(self, access: Access, cid: str) -> ContradictionView:
        c = self._visible_contradiction(access, cid)
        return self._views([c])[0]

    def facts(self, access: Access, team: str | None) -> list[Pattern]:
        scope = self.team(access, team)
        found = fact_book.list_facts(self.graph, scope)
        if not found:
            self._known(access, scope)
        return found

    def alerts(self, access: Access, status: StatusFilter | None, team: str | None) -> list[AlertView]:
        """The chat alerts of the caller's teams (admin): failed ones stay listed until requeued."""
        return list_alerts(self.graph, access, status, team)

    def teams(self, access: Access) -> list[str]:
        """The teams the caller sees: its token's, or every team in the store for an all-teams token."""
        if access.teams is not None:
            return sorted(access.teams)
        found = set(self.graph.teams())
        if self.settings.api.default_team:
            found.add(self.settings.api.default_team)
        return sorted(found)

    def audit_records(
        self,
        access: Access,
        team: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
    ) -> list[trail.AuditRecord]:
        """Who decided what, newest first (admin; an admin of some teams sees only their records)."""
        access.require("admin", team)
        found = trail.AuditLog(self.settings.data_dir / trail.AUDIT_FILE)
        return found.read(access=access, team=team, action=action, since=since, limit=limit)

    def nights(self, access: Access, runs: int) -> Report:
        """The report of the last ``runs`` nights with its verdicts (admin): of the token's teams' jobs
        only, the whole ledger for a token of every team."""
        from taskzilla_sleep.night.steps.distill.retry import given_up
        from taskzilla_sleep.observe.report.model import TeamsLedger, build_report

        access.require("admin")
        s = self.settings
        return build_report(
            self.graph if access.teams is None else TeamsLedger(self.graph, access.teams),
            runs,
            index_cap=s.memory_index.max_entries,
            grace_days=s.decay.grace_hours / 24,
            tz=s.schedule.timezone,
            now=self.clock(),
            given_up={t: n for t, n in given_up(self.graph).items() if access.sees(t)},
        )

    def export(self, access: Access, team: str | None, out: IO[str]) -> dict[str, int]:
        """The team's whole memory as JSONL (the format ``import`` reads); admin only: it carries
        every raw message, the alert outbox and the run ledger."""
        scope = access.team_for(team, self.settings.api.default_team)
        access.require("admin", scope)
        counts = export_team(self.graph, self.vectors, scope, out, self.clock())
        audit(access, "export", scope, lines=sum(counts.values()))
        return counts

    # -- writes -----------------------------------------------------------------------------------
    def ingest(self, access: Access, items: Sequence[EpisodeIn], source: str = "api") -> IngestReport:
        access.require("write")
        for team in sorted({i.team for i in items}):
            access.require("write", team)
        with self.gate.running():
            report = self.ingestor.ingest_items(items, source=source)
        teams = sorted({i.team for i in items})
        audit(
            access,
            "ingest",
            ",".join(teams),
            report.new_ids + report.edited_ids,
            present=report.present,
            skipped=report.skipped,
            edited=report.edited,
        )
        if report.new:
            self.on_ingest()
        return report

    def resolve(self, access: Access, cid: str, keep: Keep, note: str | None) -> Contradiction:
        c = self._visible_contradiction(access, cid)
        access.require("write", c.team)
        done = contradictions.resolve(
            self.graph,
            self.vectors,
            cid,
            keep,
            access.name,
            note,
            self.clock(),
            self.settings.distill.confidence_floor,
        )
        audit(access, "resolve", c.team, [cid], keep=keep, note=note)
        return done

    def requeue_alert(self, access: Access, key: str) -> RequeueReport:
        """A failed alert pending again with a fresh attempt budget (admin; a no-op for any other)."""
        report = requeue_alerts(self.graph, access, self.clock(), [key])
        audit(access, "requeue_alert", report.alerts[0].team, [key], requeued=report.requeued)
        return report

    def pin(self, access: Access, team: str | None, text: str, entity: str | None) -> Pattern:
        scope = access.team_for(team, self.settings.api.default_team)
        access.require("write", scope)
        fact = fact_book.pin(self.graph, self.vectors, scope, text, access.name, self.clock(), entity)
        audit(access, "pin", scope, [fact.id])
        return fact

    def unpin(self, access: Access, fact_id: str) -> Pattern:
        found = self.graph.patterns_by_id([fact_id])
        if not found or not found[0].pinned or not access.sees(found[0].team):
            raise NotFound(f"no pinned fact with id {fact_id!r}")
        access.require("write", found[0].team)
        fact = fact_book.unpin(self.graph, self.vectors, fact_id, access.name, self.clock())
        audit(access, "unpin", fact.team, [fact_id])
        return fact

    def forget(
        self,
        access: Access,
        team: str | None,
        reason: str,
        *,
        episode_id: str | None = None,
        author: str | None = None,
        pattern_id: str | None = None,
    ) -> ForgetReport:
        """Forget one episode, every episode of an author, or one pattern, under the consolidation
        lease; the tombstone records the token's name as ``by`` and the caller's reason."""
        scope = access.team_for(team, self.settings.api.default_team)
        access.require("write", scope)
        floor = self.settings.distill.confidence_floor
        now = self.clock()
        with self.exclusive():
            if episode_id is not None:
                report = forget_episode(self.graph, self.vectors, scope, episode_id, access.name, reason, now, floor)
            elif author is not None:
                report = forget_author(self.graph, self.vectors, scope, author, access.name, reason, now, floor)
            elif pattern_id is not None:
                report = forget_pattern(self.graph, self.vectors, scope, pattern_id, access.name, reason, now, floor)
            else:
                raise BadRequest("forget: say what to forget (an episode id, an author or a pattern id)")
        ids = [*report.episodes_forgotten, *report.patterns_forgotten]
        audit(access, "forget", scope, ids, reason=reason, rescored=len(report.patterns_rescored))
        return report

    # -- undo and release ---------------------------------------------------------------------------
    def runs_to_undo(self, access: Access, n: int = 20) -> list[RunUndo]:
        """The newest ``n`` runs of the caller's teams and whether each can be undone (admin)."""
        access.require("admin")
        out: list[RunUndo] = []
        for run in self.graph.runs(n):
            if run.dry_run:
                continue
            change = self.graph.get_change(run.id)
            teams = list(change.teams) if change is not None else ([run.team] if run.team else [])
            if not all(access.sees(t) for t in teams) or (access.teams is not None and not teams):
                continue
            state: UndoState = "nothing"
            if change is not None:
                state = "undone" if change.undone_at else "purged" if change.purged_at else "undoable"
            out.append(
                RunUndo(
                    run_id=run.id,
                    trigger=run.trigger,
                    now=run.now,
                    started_at=run.started_at,
                    teams=teams,
                    state=state,
                    undone_at=change.undone_at if change else None,
                    undone_by=change.undone_by if change else None,
                )
            )
        return out

    def undo(
        self, access: Access, run_id: str, reason: str, *, cascade: bool = False, dry_run: bool = False
    ) -> UndoReport:
        """Roll back what one run did (with ``cascade``, the later changes built on it first) under the
        consolidation lease; admin of every team the undone changes touched."""
        from taskzilla_sleep.memory.archive import plan_undo, undo_run
        from taskzilla_sleep.memory.index import rebuild_memory

        access.require("admin")
        if not reason.strip():
            raise BadRequest("undo: say why (the reason is kept with the run and in the audit log)")
        for change in plan_undo(self.graph, run_id, cascade=True):
            for team in change.teams:
                access.visible(team, f"run {run_id!r}")
                access.require("admin", team)
        with self.exclusive():
            report = undo_run(
                self.graph,
                self.vectors,
                run_id,
                access.name,
                reason,
                self.clock(),
                cascade=cascade,
                dry_run=dry_run,
                rebuild_index=lambda teams: rebuild_memory(self.graph, self.settings, teams),
            )
        if not dry_run and not report.already:
            audit(access, "undo", ",".join(report.teams), report.undone, reason=reason, cascade=cascade)
        return report

    def release(self, access: Access, team: str | None, pattern_id: str, reason: str) -> ReleaseReport:
        """A person judged a belief wrong: its messages back (texts from the archive), it retires."""
        from taskzilla_sleep.memory.archive import release_pattern
        from taskzilla_sleep.memory.index import rebuild_memory

        scope = access.team_for(team, self.settings.api.default_team)
        access.require("write", scope)
        if not reason.strip():
            raise BadRequest("release: say why (the reason is kept with the retired belief)")
        with self.exclusive():
            report = release_pattern(
                self.graph,
                self.vectors,
                scope,
                pattern_id,
                access.name,
                reason,
                self.clock(),
                rebuild_index=lambda teams: rebuild_memory(self.graph, self.settings, teams),
            )
        audit(access, "release", scope, [pattern_id, *report.given_back, *report.revived], reason=reason)
        return report

    # -- helpers ----------------------------------------------------------------------------------
    def _visible_contradiction(self, access: Access, cid: str) -> Contradiction:
        c = self.graph.get_contradiction(cid)  # NotFound when there is none
        access.visible(c.team, f"contradiction {cid!r}")
        return c

    def _views(self, found: Sequence[Contradiction]) -> list[ContradictionView]:
        beliefs = {p.id: p.statement for p in self.graph.patterns_by_id([i for c in found for i in c.pattern_ids])}
        return [
            ContradictionView(contradiction=c, old=beliefs.get(c.old_pattern_id), new=beliefs.get(c.new_pattern_id))
            for c in found
        ]


def require_known_team(graph: GraphStore, team: str, visible: Sequence[str]) -> None:
    """UnknownTeam unless ``team`` has an episode or a belief; the message suggests the nearest of
    ``visible`` (the teams the caller may see: a name it may not see is never shown)."""
    if graph.has_team(team):
        return
    near = difflib.get_close_matches(team, [t for t in visible if t != team], n=1, cutoff=0.6)
    hint = f" — did you mean {near[0]!r}?" if near else ""
    raise UnknownTeam(f"team {team!r} has no data at all (nothing was ever ingested for it): check the name{hint}")
