"""The MCP server (the official ``mcp`` SDK) on :class:`~taskzilla_sleep.service.memory_service.MemoryService`: the
tools a model calls (``tools``) and the streamable-HTTP app behind the same bearer tokens as the HTTP
API (``http``). Over stdio the caller is fixed at start (``TASKZILLA_MCP_TOKEN``)."""

from taskzilla_sleep.interfaces.mcp_server.http import MCP_PATH, BearerGate, http_app, mcp_route
from taskzilla_sleep.interfaces.mcp_server.tools import ACCESS_KEY, TOOL_NAMES, build_server

__all__ = [
    "ACCESS_KEY",
    "MCP_PATH",
    "TOOL_NAMES",
    "BearerGate",
    "build_server",
    "http_app",
    "mcp_route",
    "stdio_access",
]
