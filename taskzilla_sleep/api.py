"""The worker's HTTP API, for the bot in any language. OpenAPI schema at /openapi.json.

Write endpoints (POST) require ``Authorization: Bearer <TASKZILLA_API_TOKEN>`` when that variable
is set (the scheme in any case, RFC 7235). Bodies larger than ``api.max_body_bytes`` are refused
with 413 before they are read. Bad input is a 4xx, never a 5xx: a NotFound is 404, a Conflict 409,
any other InputError 422; a store that fails is 503.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

import structlog
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from taskzilla_sleep import contradictions as human_loop
from taskzilla_sleep.errors import Conflict, InputError, NotFound, StoreError
from taskzilla_sleep.ingest import EpisodeFileError, Ingestor, validate_item
from taskzilla_sleep.models import TEAM_RE, Contradiction, EpisodeIn, StorableStr
from taskzilla_sleep.recall import RecallItem, recall
from taskzilla_sleep.settings import Settings
from taskzilla_sleep.stores.ports import GraphStore, VectorStore

log = structlog.get_logger(__name__)


class IngestResult(BaseModel):
    new: int
    present: int
    skipped: int
    skipped_by_connector: dict[str, int]


class ItemError(BaseModel):
    index: int
    field: str
    reason: str


class ResolveBody(BaseModel):
    keep: Literal["new", "old", "both"]
    by: StorableStr = Field(min_length=1, max_length=200)
    note: StorableStr | None = Field(default=None, max_length=2000)


class ContradictionView(BaseModel):
    contradiction: Contradiction
    old: str | None
    new: str | None


class ApiDeps:
    """What the API needs from the worker; built once by the worker, shared with its loop."""

    def __init__(
        self,
        settings: Settings,
        graph: GraphStore,
        vectors: VectorStore,
        ingestor: Ingestor,
        clock: Callable[[], datetime],
        token: str | None,
        status: Callable[[], dict[str, Any]],
        metrics: Callable[[], tuple[bytes, str]],
        on_ingest: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.graph = graph
        self.vectors = vectors
        self.ingestor = ingestor
        self.clock = clock
        self.token = token
        self.status = status
        self.metrics = metrics
        self.on_ingest = on_ingest


class BodyLimit:
    """Pure ASGI middleware: refuses bodies over ``limit`` bytes, by Content-Length or while streaming."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = f'{{"detail": "request body larger than {self.limit} bytes"}}'.encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


def create_app(deps: ApiDeps) -> FastAPI:
    app = FastAPI(
        title="taskzilla-sleep",
        version="1",
        description="Memory consolidation for a team chat bot: ingest episodes, recall beliefs, "
        "resolve contradictions, health and metrics.",
    )
    limit = deps.settings.api.max_body_bytes

    app.add_middleware(BodyLimit, limit=limit)

    # The error's type says what happened (the most specific handler wins): a name that does not
    # exist is 404, a request the current state refuses is 409, any other bad input 422.
    @app.exception_handler(NotFound)
    async def not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(Conflict)
    async def conflict(_request: Request, exc: Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(InputError)
    async def input_error(_request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(StoreError)
    async def store_error(_request: Request, exc: StoreError) -> JSONResponse:
        log.warning("api_store_error", error=str(exc)[:300])
        return JSONResponse({"detail": str(exc)[:300]}, status_code=503)

    def authorize(authorization: Annotated[str | None, Header()] = None) -> None:
        if deps.token is None:
            return
        # "Bearer", "bearer", "BEARER": the scheme is case-insensitive; the token is compared in
        # constant time.
        scheme, _, token = (authorization or "").strip().partition(" ")
        is_bearer = scheme.casefold() == "bearer"
        if not (hmac.compare_digest(token.strip().encode(), deps.token.encode()) and is_bearer):
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @app.post("/episodes", response_model=IngestResult, dependencies=[Depends(authorize)])
    async def post_episodes(request: Request) -> Any:
        """Validate every item first (422 with per-item errors, nothing written), then store them."""
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({"detail": "body is not valid JSON"}, status_code=400)
        except RecursionError:
            return JSONResponse({"detail": "body is JSON nested too deeply"}, status_code=400)
        items_raw = payload.get("episodes") if isinstance(payload, dict) else payload
        if not isinstance(items_raw, list):
            return JSONResponse({"detail": 'expected a JSON list of episodes or {"episodes": [...]}'}, 400)
        items: list[EpisodeIn] = []
        errors: list[ItemError] = []
        now = deps.clock()
        for i, raw in enumerate(items_raw):
            got = validate_item(raw, deps.ingestor.limits, now)
            if isinstance(got, tuple):
                errors.append(ItemError(index=i, field=got[0], reason=got[1]))
            else:
                items.append(got)
        if errors:
            return JSONResponse({"detail": [e.model_dump() for e in errors]}, status_code=422)
        try:
            report = deps.ingestor.ingest_items(items, source="api")
        except EpisodeFileError as exc:  # ids reused with other content: numbered as the items
            bad = [ItemError(index=e.line, field=e.field, reason=e.reason) for e in exc.errors]
            return JSONResponse({"detail": [e.model_dump() for e in bad]}, status_code=422)
        except InputError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
        except StoreError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        if report.new:
            deps.on_ingest()
        return IngestResult(
            new=report.new,
            present=report.present,
            skipped=report.skipped,
            skipped_by_connector=report.skipped_by_connector,
        )

    @app.get("/recall", response_model=list[RecallItem])
    def get_recall(
        q: Annotated[str, Query(min_length=1, max_length=2000)],
        entity: str | None = None,
        team: Annotated[str | None, Query(pattern=TEAM_RE)] = None,
        k: Annotated[int, Query(ge=1, le=50)] = 5,
        include_drafts: bool = False,
    ) -> list[RecallItem]:
        """Beliefs first; the bot's own drafts only with include_drafts (and then labelled draft)."""
        teams = [team] if team else None
        return recall(
            deps.graph, deps.vectors, q, deps.clock(), teams=teams, entity=entity, k=k, include_drafts=include_drafts
        )

    @app.get("/contradictions", response_model=list[ContradictionView])
    def get_contradictions(status: Literal["open", "resolved"] = "open") -> list[ContradictionView]:
        found = deps.graph.contradictions(status=status)
        ids = [i for c in found for i in (c.old_pattern_id, c.new_pattern_id)]
        pats = {p.id: p.statement for p in deps.graph.patterns_by_id(ids)}
        return [
            ContradictionView(contradiction=c, old=pats.get(c.old_pattern_id), new=pats.get(c.new_pattern_id))
            for c in found
        ]

    @app.post("/contradictions/{cid}/resolve", response_model=Contradiction, dependencies=[Depends(authorize)])
    def post_resolve(cid: str, body: ResolveBody) -> Contradiction:
        return human_loop.resolve(
            deps.graph,
            deps.vectors,
            cid,
            body.keep,
            body.by,
            body.note,
            deps.clock(),
            deps.settings.distill.confidence_floor,
        )

    @app.get("/status")
    def get_status() -> dict[str, Any]:
        return deps.status()

    @app.get("/healthz")
    def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        problems = {}
        for name, ping in (("graph", deps.graph.ping), ("vectors", deps.vectors.ping)):
            try:
                ping()
            except StoreError as exc:
                problems[name] = str(exc)[:300]
        return JSONResponse({"ready": not problems, "problems": problems}, status_code=503 if problems else 200)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> Response:
        body, content_type = deps.metrics()
        return Response(content=body, media_type=content_type)

    return app
