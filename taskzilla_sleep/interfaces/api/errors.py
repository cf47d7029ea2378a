"""One error shape for every failure: ``{"error": {"code", "message", "details"}}``, and the status
each error type means. Handlers for the package's errors, FastAPI's validation and Starlette's own
HTTP errors all answer in this shape; every operation documents the statuses it can return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from taskzilla_sleep.core.errors import (
    BadRequest,
    Busy,
    Conflict,
    Forbidden,
    InputError,
    NotFound,
    StoreError,
    TaskzillaError,
    Unauthorized,
)
from taskzilla_sleep.memory.ingest import MAX_REPORTED_ERRORS, EpisodeFileError, field_of, reason_of

log = structlog.get_logger(__name__)

CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "busy",
    503: "unavailable",
}
DESCRIPTIONS: dict[int, str] = {
    400: "The request is malformed or names no team (and the deployment has no default team).",
    401: "No bearer token, or one that matches no configured token.",
    403: "The token's role or teams do not allow this.",
    404: "The id names nothing this token can see; `unknown_team`: the team has no data at all (a typo?).",
    409: "The current state refuses the request (e.g. already resolved another way).",
    413: "The body is larger than api.max_body_bytes.",
    422: "A field is invalid; details say which (for episodes: item index, field and reason). Nothing was written.",
    429: "Busy (too many ingests in flight, a night holds the memory lease, or this client failed to "
    "authenticate too often): retry after Retry-After seconds.",
    503: "A store is unavailable.",
}


class ItemError(BaseModel):
    """What is wrong with one episode of a batch (index from 0) or one parameter (index null)."""

    index: int | None = None
    field: str
    reason: str


class ErrorBody(BaseModel):
    code: str = Field(examples=["not_found"])
    message: str
    details: list[ItemError] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def error(
    status: int,
    message: str,
    details: Sequence[ItemError] | None = None,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
) -> JSONResponse:
    """The error body; ``code`` is the status's own unless the error names a finer one (``unknown_team``)."""
    body = ErrorResponse(error=ErrorBody(code=code or CODES.get(status, "error"), message=message, details=details))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=dict(headers or {}))


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of an operation: each status with its description and the error shape."""
    return {s: {"model": ErrorResponse, "description": DESCRIPTIONS[s]} for s in statuses}


def status_of(exc: TaskzillaError) -> int:
    for kind, status in (
        (BadRequest, 400),
        (Unauthorized, 401),
        (Forbidden, 403),
        (NotFound, 404),
        (Conflict, 409),
        (InputError, 422),
        (StoreError, 503),
        (Busy, 429),
    ):
        if isinstance(exc, kind):
            return status
    return 500


def _validation_details(errors: Sequence[Mapping[str, Any]]) -> list[ItemError]:
    """FastAPI's error list as item errors: ``("body", "episodes", 3, "ts")`` is item 3, field ts."""
    out: list[ItemError] = []
    seen: set[int | None] = set()
    for err in errors:
        loc = [p for p in err.get("loc", ()) if p != "body"]
        index: int | None = None
        if len(loc) >= 2 and loc[0] == "episodes" and isinstance(loc[1], int):
            index, loc = loc[1], loc[2:]
        elif loc and loc[0] in ("query", "path", "header"):
            loc = loc[1:]
        if index is not None and index in seen:
            continue  # the first problem of each item, as an ingest file reports it
        seen.add(index) if index is not None else None
        out.append(ItemError(index=index, field=field_of({"loc": tuple(loc)}), reason=reason_of(err)))
    return out[:MAX_REPORTED_ERRORS]


def install(app: FastAPI) -> None:
    @app.exception_handler(TaskzillaError)
    async def known(_request: Request, exc: TaskzillaError) -> JSONResponse:
        status = status_of(exc)
        if isinstance(exc, EpisodeFileError):  # ids reused with other content, timestamps out of range
            bad = [ItemError(index=e.line, field=e.field, reason=e.reason) for e in exc.errors]
            return error(422, f"{exc.total} of the episodes are invalid; nothing was written", bad)
        if isinstance(exc, Busy):
            return error(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)})
        if status >= 500:
            log.warning("api_error", error=str(exc)[:300], kind=type(exc).__name__)
        return error(status, str(exc)[:2000], code=getattr(exc, "code", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return error(400, "the body is not valid JSON")
        details = _validation_details(errors)
        items = sum(1 for d in details if d.index is not None)
        what = f"{items} of the episodes are invalid" if items else "the request is invalid"
        return error(422, f"{what}; nothing was written", details)

    @app.exception_handler(ClientDisconnect)
    async def gone(_request: Request, _exc: ClientDisconnect) -> JSONResponse:
        # The body stopped coming (the client left, or BodyLimit answered 413 and cut it): nothing
        # was written; this answer goes nowhere unless the client is still listening.
        return error(400, "the request body ended before it was complete; nothing was written")

    @app.exception_handler(StarletteHTTPException)
    async def http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail), headers=exc.headers)
