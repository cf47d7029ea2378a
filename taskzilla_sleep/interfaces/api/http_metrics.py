"""Pure ASGI middleware: counts every HTTP request by method, route *template* and status, and times it.

The route is the template of what answered (``/v1/patterns/{pattern_id}``, ``/mcp/``), never the raw
path, so a scanner trying a million paths adds one series (``unmatched``), not a million. It is read
from the route the router recorded in the scope (with a mount's prefix), else found by matching the
app's own routes (FastAPI records none for its docs routes, nor for a request refused before routing).
Outermost in the stack: a body refused for its size (413) is counted too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match

from taskzilla_sleep.core.instruments import Instruments

UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_template(routes: Sequence[BaseRoute], scope: dict[str, Any]) -> str:
    """The path template of the route that would answer ``scope`` (a 405 names its route too)."""
    return _match(routes, scope) or UNMATCHED


def _match(routes: Sequence[BaseRoute], scope: dict[str, Any]) -> str | None:
    partial: str | None = None
    for route in routes:
        match, _child = route.matches(scope)
        if match is Match.NONE:
            continue
        path = getattr(route, "path", None)
        if not isinstance(path, str):
            # A router FastAPI includes lazily (no path of its own): look among its routes.
            inner = getattr(route, "effective_candidates", None)
            path = _match(list(inner()), scope) if callable(inner) else None
            if path is None:
                continue
        if match is Match.FULL:
            return path or "/"
        partial = partial or path or "/"
    return partial


def answered_by(scope: dict[str, Any], before: dict[str, Any]) -> str | None:
    """The template of the route the router recorded in ``scope``, after a mount's prefix; None if none."""
    path = getattr(scope.get("route"), "path", None)
    if not isinstance(path, str):
        return None
    mount = str(scope.get("root_path", ""))[len(str(before.get("root_path", ""))) :]
    return mount + path


class HttpMetrics:
    def __init__(self, app: Any, instruments: Instruments, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.instruments = instruments
        self.routes = routes  # the app's route list (mounts are added to it after the middleware)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        before = dict(scope)  # routing rewrites root_path and path_params: match on what came in
        method = str(scope.get("method", ""))
        method = method if method in METHODS else "other"  # any token is a valid method: bound it
        status = 500  # an exception before the response started is answered 500 by the server
        started = time.perf_counter()

        async def recorded(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recorded)
        finally:
            route = answered_by(scope, before) or route_template(self.routes, before)
            self.instruments.http_requests.labels(method, route, str(status)).inc()
            self.instruments.http_duration.labels(method, route).observe(time.perf_counter() - started)
