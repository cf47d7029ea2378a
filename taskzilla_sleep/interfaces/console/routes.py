"""The console's pages (``/ui``): each reads or writes through :class:`MemoryService`, with the same
access checks and audit as ``/v1``; a page of a logged-out browser sends it to the login form."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from taskzilla_sleep.core.errors import Busy, InputError, TaskzillaError, Unauthorized
from taskzilla_sleep.core.models import PatternKind, PatternStatus
from taskzilla_sleep.core.throttle import client_of
from taskzilla_sleep.interfaces.api.schemas import (
    ForgetRequest,
    PinRequest,
    ReleaseRequest,
    ResolveRequest,
    UndoRequest,
)
from taskzilla_sleep.interfaces.console import browse, explore, web
from taskzilla_sleep.interfaces.console.sessions import COOKIE, LOGIN_COOKIE, Session, Sessions
from taskzilla_sleep.interfaces.console.web import (
    PREFIX,
    Console,
    error_page,
    failure,
    int_param,
    invalid,
    page,
    redirect,
    to_login,
)
from taskzilla_sleep.memory.admin import PatternDetail, PatternSummary
from taskzilla_sleep.rules.access import Access, Tokens
from taskzilla_sleep.service.audit_trail import ACTION_RE, ACTIONS
from taskzilla_sleep.service.memory_service import ContradictionView, MemoryService

log = structlog.get_logger(__name__)

PAGE = 50  # patterns a page
SCAN = 500  # patterns read per service call (the /v1 maximum) while filtering
MAX_SCAN = 20_000
EXAMPLES = 3  # messages shown per belief in the queue
ALERT_FILTERS = ("failed", "pending", "sent", "dropped")
AUDIT_PAGE = 200  # records on the audit page
Done = tuple[str, str | None]  # a form action's notice, and where to go then (None: back where it came from)
Action = Callable[[], Done]  # the service call a valid form makes (run off the event loop)


@dataclass
class Side:
    """One belief of a contradiction as a person weighs it: its text, people and example messages."""

    id: str
    text: str | None
    status: str
    confidence: float | None
    people: list[str]
    examples: list[Any]  # EvidenceEpisode
    evidence_count: int


def console_router(
    service: MemoryService,
    tokens: Tokens,
    status: Callable[[frozenset[str] | None], dict[str, Any]],
    console: Console | None = None,
) -> APIRouter:
    con = console or Console(Sessions(service.graph))
    zone = service.settings.schedule.timezone

    def in_zone(request: Request) -> None:
        request.state.zone = zone  # every time on a page is shown in the schedule's zone (web.local)

    router = APIRouter(prefix=PREFIX, include_in_schema=False, dependencies=[Depends(in_zone)])

    def team_of(s: Session, request: Request) -> tuple[str | None, list[str]]:
        """The team a page is about (``?team=``, else the default, else the caller's first) and the choices."""
        teams = service.teams(s.access)
        wanted = request.query_params.get("team") or None
        if wanted:
            return service.team(s.access, wanted), teams
        default = service.settings.api.default_team
        if default and s.access.sees(default):
            return default, teams
        return (teams[0] if teams else None), teams

    # -- login ------------------------------------------------------------------------------------
    @router.get("")
    @router.get("/")
    def home() -> Response:
        return redirect(f"{PREFIX}/contradictions")

    @router.get("/static/console.css")
    def css() -> Response:
        from taskzilla_sleep.observe.report.html import CSS

        own = (
            resources.files("taskzilla_sleep.interfaces.console")
            .joinpath("static/console.css")
            .read_text(encoding="utf-8")
        )
        return Response(CSS + own, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    @router.get("/login")
    def login_form(request: Request) -> Response:
        nxt = web.safe_next(request.query_params.get("next"))
        if con.sessions.get(request.cookies.get(COOKIE), take_notices=False) is not None:
            return redirect(nxt)
        nonce, fresh = web.login_nonce(request)
        res = web.html("login.html", who=None, csrf=nonce, notices=[], path=request.url.path, next=nxt, error=None)
        if fresh:
            web.set_login_cookie(res, request, nonce)
        return res

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        nxt = web.safe_next(_text(form.get("next")))
        nonce = request.cookies.get(LOGIN_COOKIE) or ""
        sent = _text(form.get("csrf")) or ""
        if not nonce or not hmac.compare_digest(nonce.encode(), sent.encode()):
            return error_page(
                request, None, 403, "the login form expired or came from elsewhere: reload it", "/ui/login"
            )
        ctx: dict[str, Any] = {"who": None, "csrf": nonce, "notices": [], "path": request.url.path, "next": nxt}
        try:
            access = tokens.authenticate(_text(form.get("token")) or None, client_of(request), "console")
        except Unauthorized as exc:
            log.info("console_login_refused", reason=str(exc))
            return web.html("login.html", 401, error=str(exc), **ctx)
        except Busy as exc:  # this browser's address failed too often: it waits (throttle.py)
            return web.html("login.html", 429, headers={"Retry-After": str(exc.retry_after_s)}, error=str(exc), **ctx)
        s = await run_in_threadpool(con.sessions.start, access)
        log.info("console_login", who=access.name, role=access.role)
        res = redirect(nxt)
        web.set_session_cookie(res, request, s)
        res.delete_cookie(LOGIN_COOKIE, path=PREFIX)
        return res

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        s, refused = await run_in_threadpool(con.posted, request, await request.form())
        if s is None:
            return refused or to_login(request)
        await run_in_threadpool(con.sessions.end, s.id)
        log.info("console_logout", who=s.access.name)
        res = redirect(f"{PREFIX}/login")
        res.delete_cookie(COOKIE, path=PREFIX)
        return res

    # -- contradictions ---------------------------------------------------------------------------
    @router.get("/contradictions")
    def contradictions(request: Request) -> Response:
        def render(s: Session) -> Response:
            state = request.query_params.get("status", "open")
            if state not in ("open", "resolved"):
                raise InputError(f"status must be open or resolved, not {state!r}")
            team, teams = team_of(s, request)
            views = service.contradictions(s.access, team, state) if team else []
            items = [
                (v, _side(service, s.access, team, v, "old"), _side(service, s.access, team, v, "new")) for v in views
            ]
            return page(
                request, s, "contradictions.html", team=team, teams=teams, items=items, state=state, single=False
            )

        return con.show(request, render)

    @router.get("/contradictions/{cid}")
    def contradiction(request: Request, cid: str) -> Response:
        """One contradiction, open or resolved: the page a chat alert's "Open in console" opens."""

        def render(s: Session) -> Response:
            v = service.contradiction(s.access, cid)
            team = v.contradiction.team
            items = [(v, _side(service, s.access, team, v, "old"), _side(service, s.access, team, v, "new"))]
            state = v.contradiction.status.value
            return page(request, s, "contradictions.html", team=team, teams=[], items=items, state=state, single=True)

        return con.show(request, render, f"{PREFIX}/contradictions")

    async def act(request: Request, back: Callable[[Any], str], work: Callable[[Session, Any], Action]) -> Response:
        """A form POST: session and CSRF checked; ``work`` validates the form into a service call (an
        invalid form: the 422 page, nothing written), run off the event loop; then back with its notice,
        or with the error it raised."""
        form = await request.form()
        s, refused = await run_in_threadpool(con.posted, request, form)
        if s is None:
            return refused or to_login(request)
        where = back(form)
        try:
            call = work(s, form)
        except ValidationError as exc:
            return invalid(request, s, exc, where)
        try:
            notice, then = await run_in_threadpool(call)
        except TaskzillaError as exc:
            return failure(request, s, exc, where)
        await run_in_threadpool(con.sessions.notice, s, "ok", notice)
        return redirect(then or where)

    @router.post("/contradictions/{cid}/resolve")
    async def resolve(request: Request, cid: str) -> Response:
        def work(s: Session, form: Any) -> Action:
            body = ResolveRequest.model_validate(
                {"keep": _text(form.get("keep")), "note": _text(form.get("note")) or None}
            )

            def call() -> Done:
                done = service.resolve(s.access, cid, body.keep, body.note)
                return f"resolved {done.id}: kept {done.resolution} (by {done.resolved_by})", None

            return call

        return await act(request, lambda form: _back(form, "/ui/contradictions"), work)

    # -- patterns ---------------------------------------------------------------------------------
    @router.get("/patterns")
    def patterns(request: Request) -> Response:
        def render(s: Session) -> Response:
            q = request.query_params
            text = (q.get("q") or "").strip()
            team, teams = team_of(s, request)
            status = _enum(PatternStatus, q.get("status"), "status")
            kind = _enum(PatternKind, q.get("kind"), "kind")
            topic = q.get("topic") or None
            number = int_param(q.get("page"), "page", 1)
            found = _all_patterns(service, s.access, team, status) if team else []
            topics = sorted({p.topic for p in found})
            hits = [
                p
                for p in found
                if (kind is None or p.kind is kind)
                and (topic is None or p.topic == topic)
                and (not text or text.casefold() in p.statement.casefold())
            ]
            shown = hits[(number - 1) * PAGE : number * PAGE]
            return page(
                request,
                s,
                "patterns.html",
                team=team,
                teams=teams,
                patterns=shown,
                total=len(hits),
                number=number,
                pages=max(1, -(-len(hits) // PAGE)),
                q=text,
                status_filter=status.value if status else "",
                kind=kind.value if kind else "",
                topic=topic or "",
                topics=topics,
                statuses=[x.value for x in PatternStatus],
                kinds=[x.value for x in PatternKind],
            )

        return con.show(request, render)

    @router.get("/patterns/{pid}")
    def pattern(request: Request, pid: str) -> Response:
        def render(s: Session) -> Response:
            detail: PatternDetail
            if request.query_params.get("team"):
                team, teams = team_of(s, request)
                detail = service.pattern(s.access, team, pid)
            else:  # a link that names no team (the stable URL): the belief's own team
                detail = browse.pattern(service, s.access, pid)
                team, teams = detail.pattern.team, service.teams(s.access)
            return page(request, s, "pattern.html", team=team, teams=teams, d=detail)

        return con.show(request, render, f"/ui/patterns?team={request.query_params.get('team', '')}")

    @router.post("/patterns/{pid}/forget")
    async def forget(request: Request, pid: str) -> Response:
        def work(s: Session, form: Any) -> Action:
            body = ForgetRequest(
                team=_text(form.get("team")) or None, reason=_text(form.get("reason")) or "", pattern_id=pid
            )

            def call() -> Done:
                report = service.forget(s.access, body.team, body.reason, pattern_id=body.pattern_id)
                rescored = len(report.patterns_rescored)
                return (
                    f"forgot pattern {pid} ({rescored} other beliefs re-scored)",
                    f"{PREFIX}/patterns?team={body.team or ''}",
                )

            return call

        return await act(request, lambda form: f"{PREFIX}/patterns/{pid}?team={_text(form.get('team')) or ''}", work)

    @router.post("/patterns/{pid}/release")
    async def release(request: Request, pid: str) -> Response:
        def work(s: Session, form: Any) -> Action:
            body = ReleaseRequest(team=_text(form.get("team")) or None, reason=_text(form.get("reason")) or "")

            def call() -> Done:
                return service.release(s.access, body.team, pid, body.reason).summary(), None

            return call

        return await act(request, lambda form: f"{PREFIX}/patterns/{pid}?team={_text(form.get('team')) or ''}", work)

    # -- pinned facts -----------------------------------------------------------------------------
    @router.get("/facts")
    def facts(request: Request) -> Response:
        def render(s: Session) -> Response:
            team, teams = team_of(s, request)
            found = service.facts(s.access, team) if team else []
            return page(request, s, "facts.html", team=team, teams=teams, facts=found)

        return con.show(request, render)

    @router.post("/facts")
    async def pin(request: Request) -> Response:
        def work(s: Session, form: Any) -> Action:
            text, entity = _text(form.get("text")) or "", _text(form.get("entity")) or None
            body = PinRequest(team=_text(form.get("team")) or None, text=text, entity=entity)
            return lambda: (f"pinned {service.pin(s.access, body.team, body.text, body.entity).id}", None)

        return await act(request, lambda form: f"{PREFIX}/facts?team={_text(form.get('team')) or ''}", work)

    @router.post("/facts/{fid}/unpin")
    async def unpin(request: Request, fid: str) -> Response:
        def work(s: Session, _form: Any) -> Action:
            return lambda: (f"unpinned {service.unpin(s.access, fid).id}", None)

        return await act(request, lambda form: _back(form, "/ui/facts"), work)

    # -- nights, alerts, status (admin) -----------------------------------------------------------
    @router.get("/nights")
    def nights(request: Request) -> Response:
        from taskzilla_sleep.observe.report.html import report_sections

        def render(s: Session) -> Response:
            runs = int_param(request.query_params.get("runs"), "runs", 14, high=365)
            report = service.nights(s.access, runs)
            undo = service.runs_to_undo(s.access, runs)
            body = "\n".join(report_sections(report))  # the report's own escaped HTML and SVG
            return page(request, s, "nights.html", report=report, body=body, runs=runs, undo=undo)

        return con.show(request, render)

    @router.post("/runs/{run_id}/undo")
    async def undo(request: Request, run_id: str) -> Response:
        def work(s: Session, form: Any) -> Action:
            body = UndoRequest(reason=_text(form.get("reason")) or "", cascade=form.get("cascade") == "1")

            def call() -> Done:
                report = service.undo(s.access, run_id, body.reason, cascade=body.cascade)
                return report.summary(), None

            return call

        return await act(request, lambda form: f"{PREFIX}/nights", work)

    @router.get("/alerts")
    def alerts(request: Request) -> Response:
        def render(s: Session) -> Response:
            wanted = request.query_params.get("status") or None
            if wanted is not None and wanted not in ALERT_FILTERS:
                raise InputError(f"status must be one of {', '.join(ALERT_FILTERS)}, not {wanted!r}")
            found = service.alerts(s.access, wanted, None)  # type: ignore[arg-type]
            return page(request, s, "alerts.html", alerts=found, state=wanted or "", filters=ALERT_FILTERS)

        return con.show(request, render)

    @router.post("/alerts/{key}/requeue")
    async def requeue(request: Request, key: str) -> Response:
        def work(s: Session, _form: Any) -> Action:
            return lambda: (f"requeued {service.requeue_alert(s.access, key).requeued} alert(s): {key}", None)

        return await act(request, lambda form: _back(form, "/ui/alerts"), work)

    @router.get("/audit")
    def audit_page(request: Request) -> Response:
        def render(s: Session) -> Response:
            q = request.query_params
            team, action = q.get("team") or None, q.get("action") or None
            if action is not None and not re.fullmatch(ACTION_RE, action):
                raise InputError(f"action must be an action name (e.g. resolve, forget), not {action[:50]!r}")
            records = service.audit_records(s.access, team, action, None, AUDIT_PAGE)
            teams = service.teams(s.access)
            return page(
                request,
                s,
                "audit.html",
                records=records,
                teams=teams,
                team=team or "",
                action=action or "",
                actions=ACTIONS,
                limit=AUDIT_PAGE,
            )

        return con.show(request, render)

    @router.get("/status")
    def status_page(request: Request) -> Response:
        def render(s: Session) -> Response:
            s.access.require("admin")  # as GET /v1/status: the figures of the token's teams
            st = status(s.access.teams)
            return page(request, s, "status.html", st=st)

        return con.show(request, render)

    explore.add_routes(router, service, con, team_of)

    return router


def _side(service: MemoryService, access: Access, team: str | None, v: ContradictionView, which: str) -> Side:
    pid = v.contradiction.old_pattern_id if which == "old" else v.contradiction.new_pattern_id
    text = v.old if which == "old" else v.new
    try:
        d = service.pattern(access, team, pid)
    except InputError:  # the belief is gone (forgotten): the queue still shows the contradiction
        return Side(pid, text, "gone", None, [], [], 0)
    people = sorted({e.author for e in d.evidence})
    examples = [e for e in d.evidence if e.text][-EXAMPLES:]
    return Side(pid, text, d.pattern.status.value, d.pattern.confidence, people, examples, len(d.evidence))


def _all_patterns(
    service: MemoryService, access: Access, team: str, status: PatternStatus | None
) -> list[PatternSummary]:
    out: list[PatternSummary] = []
    while len(out) < MAX_SCAN:
        got = service.patterns(access, team, status, SCAN, len(out))
        out += got
        if len(got) < SCAN:
            break
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _back(form: Any, default: str) -> str:
    return web.safe_next(_text(form.get("back"))) if _text(form.get("back")) else default


def _enum(kind: type[PatternStatus] | type[PatternKind], value: str | None, what: str) -> Any:
    if not value:
        return None
    try:
        return kind(value)
    except ValueError as exc:
        raise InputError(f"{what} must be one of {', '.join(x.value for x in kind)}, not {value!r}") from exc
