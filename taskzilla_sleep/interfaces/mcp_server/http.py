"""The streamable-HTTP MCP app behind the API's bearer tokens.

:class:`BearerGate` authenticates every HTTP request with the same :class:`~taskzilla_sleep.rules.access.Tokens`
as the HTTP API: no valid ``Authorization: Bearer <token>`` (when tokens are configured) is a 401 in
the API's error shape, before the MCP transport sees the request; otherwise the caller's
:class:`~taskzilla_sleep.rules.access.Access` rides in the request's ASGI scope, where each tool call reads
it (so a call is always judged by the token of the request that carries it). The token itself is
never logged nor kept.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from taskzilla_sleep.core.errors import Busy, Unauthorized
from taskzilla_sleep.interfaces.mcp_server.tools import ACCESS_KEY
from taskzilla_sleep.rules.access import Tokens

MCP_PATH = "/mcp"


class BearerGate:
    """ASGI middleware: authenticate, then pass the request on with its caller in the scope."""

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the session manager's start and stop
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        try:
            access = self.tokens.authorization(
                Headers(scope=scope).get("authorization"), client[0] if client else "unknown", "mcp"
            )
        except Unauthorized as exc:
            body = {"error": {"code": "unauthorized", "message": str(exc), "details": None}}
            headers = {"WWW-Authenticate": 'Bearer realm="taskzilla-sleep"'}
            await JSONResponse(body, status_code=401, headers=headers)(scope, receive, send)
            return
        except Busy as exc:  # this client failed too often: it waits (throttle.py)
            body = {"error": {"code": "busy", "message": str(exc), "details": None}}
            headers = {"Retry-After": str(exc.retry_after_s)}
            await JSONResponse(body, status_code=429, headers=headers)(scope, receive, send)
            return
        await self.app({**scope, ACCESS_KEY: access}, receive, send)


def http_app(server: MCPServer[Any], tokens: Tokens, host: str, max_body_bytes: int, path: str = MCP_PATH) -> ASGIApp:
    """The MCP server's streamable-HTTP app at ``path`` behind the gate. Its lifespan runs the SDK's
    session manager, so the ASGI server must run the lifespan (uvicorn ``lifespan="on"``)."""
    inner = server.streamable_http_app(streamable_http_path=path, host=host, max_request_body_size=max_body_bytes)
    return BearerGate(inner, tokens)


def mcp_route(
    server: MCPServer[Any], tokens: Tokens, host: str, max_body_bytes: int, path: str = MCP_PATH
) -> tuple[Route, Callable[[], AbstractAsyncContextManager[None]]]:
    """The MCP endpoint as one route of another app (the worker's API), behind the gate, and the SDK's
    session manager's ``run``: the host app enters it in its lifespan (it holds the task group every
    MCP session runs in), so that app's server must run the lifespan."""
    server.streamable_http_app(streamable_http_path=path, host=host, max_request_body_size=max_body_bytes)
    manager = server.session_manager
    return Route(path, endpoint=BearerGate(StreamableHTTPASGIApp(manager), tokens)), manager.run
