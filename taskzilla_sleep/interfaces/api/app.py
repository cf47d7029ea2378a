"""The worker's HTTP API for the bot, in any language: ``/v1`` operations scoped to a team and a
token, and the ops probes (``/healthz``, ``/readyz``, ``/metrics``). OpenAPI at ``/openapi.json``, shown
by Swagger UI at ``/docs`` and ReDoc at ``/redoc`` (served offline: ``api/docs.py``).

Blocking work (embedding, store calls) never runs on the event loop: plain ``def`` operations run
in the threadpool, and an ingest waits in a bounded queue (``api.ingest_concurrency`` running,
``api.ingest_queue`` waiting; beyond that 429 with Retry-After), so probes and recalls answer while
a large batch is stored.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AwareDatetime, ValidationError
from starlette.routing import BaseRoute

from taskzilla_sleep.alerts.admin import AlertView, RequeueReport, StatusFilter
from taskzilla_sleep.core.errors import Busy, StoreError
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.models import TEAM_RE, Contradiction, Pattern, PatternStatus
from taskzilla_sleep.core.throttle import client_of
from taskzilla_sleep.interfaces.api import docs, errors
from taskzilla_sleep.interfaces.api.body_limit import BodyLimit
from taskzilla_sleep.interfaces.api.errors import responses
from taskzilla_sleep.interfaces.api.http_metrics import HttpMetrics
from taskzilla_sleep.interfaces.api.schemas import (
    ForgetRequest,
    Health,
    IngestRequest,
    IngestResult,
    ModelReadiness,
    PinRequest,
    Readiness,
    RecallResult,
    ReleaseRequest,
    ResolveRequest,
    UndoRequest,
)
from taskzilla_sleep.llm.check import ModelCheck
from taskzilla_sleep.memory.admin import ForgetReport, PatternDetail, PatternSummary
from taskzilla_sleep.memory.archive import ReleaseReport, UndoReport
from taskzilla_sleep.memory.ingest import IngestReport
from taskzilla_sleep.memory.recall import render_prompt
from taskzilla_sleep.rules.access import Access, Tokens
from taskzilla_sleep.service.audit_trail import ACTION_RE, AuditRecord
from taskzilla_sleep.service.memory_service import ContradictionView, MemoryService, RunUndo

T = TypeVar("T")
Team = Annotated[str | None, Query(pattern=TEAM_RE, description="the team (default: api.default_team)")]
READ = responses(400, 401, 403, 422, 429, 503)
READ_TEAM = responses(400, 401, 403, 404, 422, 429, 503)  # 404 unknown_team: a team with no data at all
JSONL: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}, "description": "one JSON object a line"}
}
WRITE = responses(400, 401, 403, 404, 409, 413, 422, 429, 503)


_bearer = HTTPBearer(auto_error=False, description="an API token (its SHA-256 is in api.tokens)")


def _caller(request: Request, cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Access:
    tokens: Tokens = request.app.state.tokens
    return tokens.authenticate(cred.credentials if cred else None, client_of(request), "api")


Caller = Annotated[Access, Depends(_caller)]


class ApiDeps:
    """What the API needs from the worker; built once by the worker, shared with its loop."""

    def __init__(
        self,
        service: MemoryService,
        tokens: Tokens,
        status: Callable[[frozenset[str] | None], dict[str, Any]],
        metrics: Callable[[], tuple[bytes, str]],
        mounts: list[tuple[BaseRoute, Callable[[], AbstractAsyncContextManager[None]]]] | None = None,
        instruments: Instruments | None = None,
        model_check: Callable[[], ModelCheck | None] | None = None,
    ) -> None:
        self.service = service
        self.model_check = model_check  # the worker's cached model verdict, shown by /readyz (None: not shown)
        self.tokens = tokens
        self.status = status
        self.metrics = metrics
        # Other apps served beside /v1 (the MCP server at /mcp), each with what must run while it is
        # served (entered in the app's lifespan: the server must run it).
        self.mounts = mounts or []
        self.instruments = instruments  # requests counted by route template and status (None: not counted)


class IngestQueue:
    """At most ``concurrency`` ingests run (in threads) and ``waiting`` wait; one more is refused."""

    def __init__(self, concurrency: int, waiting: int) -> None:
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.concurrency = concurrency
        self.capacity = concurrency + waiting
        self.pending = 0  # touched on the event loop only
        self.mean_s = 1.0

    async def run(self, work: Callable[[], T]) -> T:
        if self.pending >= self.capacity:
            wait = max(1, math.ceil(self.mean_s * self.pending / self.concurrency))
            raise Busy(f"{self.pending} ingests are in flight; retry in {wait} s", retry_after_s=wait)
        self.pending += 1
        started = time.monotonic()
        try:
            return await anyio.to_thread.run_sync(work, limiter=self.limiter)
        finally:
            self.pending -= 1
            self.mean_s = 0.8 * self.mean_s + 0.2 * (time.monotonic() - started)


def create_app(deps: ApiDeps) -> FastAPI:
    service = deps.service
    settings = service.settings

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for _route, run in deps.mounts:
                await stack.enter_async_context(run())
            yield

    app = FastAPI(
        lifespan=lifespan,
        # Not FastAPI's /docs nor /redoc (their scripts come from a CDN): ours, from the worker (api/docs.py).
        docs_url=None,
        redoc_url=None,
        title="taskzilla-sleep",
        version="1",
        description="Memory consolidation for a team chat bot: ingest episodes, recall beliefs, resolve "
        "contradictions, pin facts. Every /v1 operation is scoped to one team and, when tokens are "
        "configured, to a bearer token's teams and role (read < write < admin).",
    )
    app.add_middleware(BodyLimit, limit=settings.api.max_body_bytes)
    if deps.instruments is not None:  # added last, so outermost: a 413 of BodyLimit is counted too
        app.add_middleware(HttpMetrics, instruments=deps.instruments, routes=app.router.routes)
    errors.install(app)
    app.state.tokens = deps.tokens
    queue = IngestQueue(settings.api.ingest_concurrency, settings.api.ingest_queue)
    v1 = APIRouter(prefix="/v1")

    @v1.post(
        "/episodes",
        operation_id="ingestEpisodes",
        response_model=IngestResult,
        responses=WRITE | responses(429),
        openapi_extra={"requestBody": INGEST_BODY},
    )
    async def ingest_episodes(request: Request, who: Caller) -> IngestResult:
        """Store a batch of episodes (all or nothing); a re-sent episode is counted as present."""
        raw = await request.body()  # parsed and validated in the ingest's thread: 5,000 episodes take ~0.1 s

        def work() -> IngestReport:
            return service.ingest(who, _ingest_request(raw).episodes)

        report = await queue.run(work)
        return IngestResult(
            new=report.new,
            present=report.present,
            skipped=report.skipped,
            skipped_by_connector=report.skipped_by_connector,
            edited=report.edited,
            edits_ignored=report.edits_ignored,
        )

    @v1.get("/recall", operation_id="recall", response_model=RecallResult, responses=READ_TEAM)
    def recall(
        who: Caller,
        q: Annotated[str, Query(min_length=1, max_length=2000, description="the question")],
        team: Team = None,
        entity: Annotated[str | None, Query(max_length=200, description="only about this person/channel")] = None,
        k: Annotated[
            int, Query(ge=1, le=50, description="the best k hits; a contested belief brings its other side")
        ] = 5,
        include: Annotated[
            list[Literal["drafts", "superseded"]],
            Query(description="also the bot's own drafts, or beliefs a person's resolution replaced"),
        ] = [],  # noqa: B006
        format: Annotated[
            Literal["json", "prompt"], Query(description="prompt: also a quoted block for a system prompt")
        ] = "json",
        budget: Annotated[int, Query(ge=20, le=20_000, description="the prompt block's token budget")] = 600,
    ) -> RecallResult:
        """Pinned facts first, then beliefs before raw episodes as close; never another team.
        Each item names its scores (similarity, confidence), author, channel, time and provenance."""
        scope = service.team(who, team)
        items = service.recall(
            who,
            scope,
            q,
            entity=entity,
            k=k,
            include_drafts="drafts" in include,
            include_superseded="superseded" in include,
        )
        prompt = render_prompt(items, budget) if format == "prompt" else None
        return RecallResult(team=scope, items=items, prompt=prompt)

    @v1.get("/patterns", operation_id="listPatterns", response_model=list[PatternSummary], responses=READ_TEAM)
    def list_patterns(
        who: Caller,
        team: Team = None,
        status: PatternStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[PatternSummary]:
        """The team's patterns (beliefs and facts), a page at a time."""
        return service.patterns(who, team, status, limit, offset)

    @v1.get(
        "/patterns/{pattern_id}",
        operation_id="getPattern",
        response_model=PatternDetail,
        responses=READ | responses(404),
    )
    def get_pattern(who: Caller, pattern_id: Annotated[str, Path(max_length=200)], team: Team = None) -> PatternDetail:
        """One pattern with its evidence episodes, contradictions, links and history."""
        return service.pattern(who, team, pattern_id)

    @v1.get(
        "/contradictions",
        operation_id="listContradictions",
        response_model=list[ContradictionView],
        responses=READ_TEAM,
    )
    def list_contradictions(
        who: Caller, team: Team = None, status: Literal["open", "resolved"] = "open"
    ) -> list[ContradictionView]:
        return service.contradictions(who, team, status)

    @v1.get(
        "/contradictions/{contradiction_id}",
        operation_id="getContradiction",
        response_model=ContradictionView,
        responses=READ | responses(404),
    )
    def get_contradiction(who: Caller, contradiction_id: Annotated[str, Path(max_length=200)]) -> ContradictionView:
        return service.contradiction(who, contradiction_id)

    @v1.post(
        "/contradictions/{contradiction_id}/resolve",
        operation_id="resolveContradiction",
        response_model=Contradiction,
        responses=WRITE,
    )
    def resolve_contradiction(
        who: Caller, contradiction_id: Annotated[str, Path(max_length=200)], body: ResolveRequest
    ) -> Contradiction:
        """Keep the new belief, the old one, or both; recorded as decided by the token's name."""
        return service.resolve(who, contradiction_id, body.keep, body.note)

    @v1.get("/facts", operation_id="listFacts", response_model=list[Pattern], responses=READ_TEAM)
    def list_facts(who: Caller, team: Team = None) -> list[Pattern]:
        return service.facts(who, team)

    @v1.post("/facts", operation_id="pinFact", response_model=Pattern, responses=WRITE)
    def pin_fact(who: Caller, body: PinRequest) -> Pattern:
        return service.pin(who, body.team, body.text, body.entity)

    @v1.delete("/facts/{fact_id}", operation_id="unpinFact", response_model=Pattern, responses=WRITE)
    def unpin_fact(who: Caller, fact_id: Annotated[str, Path(max_length=200)]) -> Pattern:
        return service.unpin(who, fact_id)

    @v1.post("/forget", operation_id="forget", response_model=ForgetReport, responses=WRITE | responses(429))
    def forget(who: Caller, body: ForgetRequest) -> ForgetReport:
        """Forget an episode, an author's every episode, or a pattern, from both stores. Beliefs that
        lose evidence are re-scored (retired when none is left); a forgotten belief's absorbed
        messages become raw again. Waits for a running night (429 with Retry-After after 30 s)."""
        return service.forget(
            who, body.team, body.reason, episode_id=body.episode_id, author=body.author, pattern_id=body.pattern_id
        )

    @v1.get(
        "/export",
        operation_id="exportTeam",
        response_model=None,
        responses=JSONL | responses(400, 401, 403, 422, 429, 503),
    )
    def export(who: Caller, team: Team = None) -> Response:
        """The team's whole memory as JSONL, the file `taskzilla-sleep import` reads (admin)."""
        out = io.StringIO()
        service.export(who, team, out)
        return Response(content=out.getvalue(), media_type="application/x-ndjson")

    @v1.get("/runs", operation_id="listRunsToUndo", response_model=list[RunUndo], responses=READ)
    def list_runs(who: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 20) -> list[RunUndo]:
        """The newest runs of the token's teams and whether each can still be undone (admin)."""
        return service.runs_to_undo(who, limit)

    @v1.post(
        "/runs/{run_id}/undo",
        operation_id="undoRun",
        response_model=UndoReport,
        responses=WRITE | responses(429),
    )
    def undo_run(who: Caller, run_id: Annotated[str, Path(max_length=200)], body: UndoRequest) -> UndoReport:
        """Roll back everything one run did while its archive lasts (``decay.archive_days``): patterns it
        created or bumped, absorptions, retirements (texts and vectors back), contradictions and their
        alerts (a sent one gets a follow-up), the memory index (admin). 409 when later changes built on
        it, unless ``cascade``; a repeat changes nothing (``already``)."""
        return service.undo(who, run_id, body.reason, cascade=body.cascade, dry_run=body.dry_run)

    @v1.post(
        "/patterns/{pattern_id}/release",
        operation_id="releasePattern",
        response_model=ReleaseReport,
        responses=WRITE | responses(429),
    )
    def release_pattern(
        who: Caller, pattern_id: Annotated[str, Path(max_length=200)], body: ReleaseRequest
    ) -> ReleaseReport:
        """A belief judged wrong: the messages it absorbed are raw again (retired ones with their text
        and vector from the archive) and it is retired, with the token's name and the reason."""
        return service.release(who, body.team, pattern_id, body.reason)

    @v1.get("/alerts", operation_id="listAlerts", response_model=list[AlertView], responses=READ)
    def list_alerts(who: Caller, status: StatusFilter | None = None, team: Team = None) -> list[AlertView]:
        """The chat alerts of the token's teams, oldest first (admin): ``status=failed`` lists those
        given up after ``alerts.max_attempts`` (kept until requeued); ``sent`` is ``delivered``."""
        return service.alerts(who, status, team)

    @v1.post(
        "/alerts/{alert_id}/requeue",
        operation_id="requeueAlert",
        response_model=RequeueReport,
        responses=responses(400, 401, 403, 404, 422, 429, 503),
    )
    def requeue_alert(who: Caller, alert_id: Annotated[str, Path(max_length=300)]) -> RequeueReport:
        """A failed alert pending again, due now, with a fresh attempt budget (admin). Idempotent:
        an alert that is not failed is left as it is (``requeued`` 0)."""
        return service.requeue_alert(who, alert_id)

    @v1.get("/audit", operation_id="listAudit", response_model=list[AuditRecord], responses=READ)
    def list_audit(
        who: Caller,
        team: Team = None,
        action: Annotated[
            str | None, Query(pattern=ACTION_RE, description="only this action (resolve, forget...)")
        ] = None,
        since: Annotated[
            AwareDatetime | None, Query(description="only records at or after (ISO-8601 with offset)")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> list[AuditRecord]:
        """Who decided what, newest first (admin; an admin of some teams sees only their records): the
        time, the token (or chat user, or cli:NAME), its role, the action, the team and ids, and what
        the action adds (keep, note, reason...)."""
        return service.audit_records(who, team, action, since, limit)

    @v1.get("/status", operation_id="getStatus", responses=responses(401, 403, 429, 503))
    def get_status(who: Caller) -> dict[str, Any]:
        """Store sizes, backends, schedule and the last runs (admin): of the token's teams only, every
        team's for a token of every team (``teams`` says which: null is every team)."""
        who.require("admin")
        return deps.status(who.teams)

    app.include_router(v1)
    from taskzilla_sleep.interfaces.console import console_router  # the memory console at /ui (HTML for people)

    app.include_router(console_router(service, deps.tokens, deps.status))

    @app.get("/", include_in_schema=False)
    def root() -> Response:
        """A browser at the worker's address lands on the console (its login form when logged out)."""
        return RedirectResponse("/ui", status_code=303)

    app.router.routes.extend(route for route, _run in deps.mounts)
    docs.install(app)
    _finish_schema(app, token_optional=deps.tokens.open)

    @app.get("/healthz", operation_id="health", response_model=Health, tags=["probes"])
    def healthz() -> Health:
        return Health(ok=True)

    not_ready: dict[int | str, dict[str, Any]] = {503: {"model": Readiness, "description": "a store does not answer"}}

    @app.get("/readyz", operation_id="ready", response_model=Readiness, tags=["probes"], responses=not_ready)
    def readyz() -> JSONResponse:
        problems = {}
        for name, ping in (("graph", service.graph.ping), ("vectors", service.vectors.ping)):
            try:
                ping()
            except StoreError as exc:
                problems[name] = str(exc)[:300]
        # The model is detail, not readiness: recall and ingest need no model, and the night retries.
        check = deps.model_check() if deps.model_check is not None else None
        model = ModelReadiness(**check.as_dict()) if check is not None else None
        body = Readiness(ready=not problems, problems=problems, model=model).model_dump(mode="json")
        return JSONResponse(body, status_code=503 if problems else 200)

    @app.get("/metrics", operation_id="metrics", response_class=PlainTextResponse, tags=["probes"])
    def metrics() -> Response:
        body, content_type = deps.metrics()
        return Response(content=body, media_type=content_type)

    return app


INGEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/IngestRequest"}}},
}


def _ingest_request(raw: bytes) -> IngestRequest:
    """The body of an ingest, read off the event loop; errors as FastAPI's own validation reports them."""
    try:
        # The standard parser, as FastAPI's own: a lone surrogate escape is the field's error (422).
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body",), "msg": str(exc)[:200]}]) from exc
    try:
        return IngestRequest.model_validate(parsed)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False, include_context=False)]
        ) from exc


def _no_null_defaults(schema: Any) -> Any:
    """As FastAPI writes a request body: no ``"default": null`` (generators such as openapi-typescript
    would type such a field as required)."""
    if isinstance(schema, dict):
        return {k: _no_null_defaults(v) for k, v in schema.items() if not (k == "default" and v is None)}
    if isinstance(schema, list):
        return [_no_null_defaults(v) for v in schema]
    return schema


def _finish_schema(app: FastAPI, token_optional: bool) -> None:
    """Two things FastAPI cannot say by itself: a JSONL answer is not also JSON, and an open
    deployment (no token configured) takes requests without a token."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            # The ingest body is read in a thread (not by FastAPI on the event loop): its schema by hand.
            body = _no_null_defaults(IngestRequest.model_json_schema(ref_template="#/components/schemas/{model}"))
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, sub in body.pop("$defs", {}).items():
                components.setdefault(name, sub)
            components["IngestRequest"] = body
            for item in schema.get("paths", {}).values():
                for op in item.values():
                    if not isinstance(op, dict):
                        continue
                    ok = op.get("responses", {}).get("200", {}).get("content", {})
                    if "application/x-ndjson" in ok:
                        ok.pop("application/json", None)
                    if token_optional and op.get("security"):
                        op["security"] = [*op["security"], {}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
