"""`taskzilla-sleep mcp`: serve the memory to an MCP host, over stdio or streamable HTTP.

``cli.py`` builds the rest of the parser and dispatches here; the tools are in ``mcp_server``. The
caller is checked before any store is opened: over stdio the token comes from ``TASKZILLA_MCP_TOKEN``
(refused at start, exit 2, when tokens are configured and it is missing or wrong); over HTTP every
request brings its own bearer token. A forget takes the consolidation lease like the worker's API does.
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

import structlog

from taskzilla_sleep.core.errors import ConfigError, Unauthorized
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli_args import port_number
from taskzilla_sleep.interfaces.cli_ops import on_sigterm
from taskzilla_sleep.rules.access import Access, Tokens

log = structlog.get_logger(__name__)
DEFAULT_PORT = 8766  # the API's default port + 1


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    mcp = sub.add_parser(
        "mcp", parents=[common], help="serve the memory to an MCP host (tools: recall, remember, resolve, forget...)"
    )
    mcp.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default; the caller's token in env TASKZILLA_MCP_TOKEN) or streamable HTTP at /mcp",
    )
    mcp.add_argument("--host", help="--transport http: the address to bind (default: api.host)")
    mcp.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help=f"--transport http: the port (default {DEFAULT_PORT}; 0: any)",
    )


def stdio_access(tokens: Tokens, token: str | None) -> Access:
    """The stdio server's caller, from ``TASKZILLA_MCP_TOKEN``: refused at start (exit 2) when tokens are
    configured and it is missing or matches none. An open deployment (no token configured) is open."""
    if tokens.open:
        return tokens.authenticate(None)
    if not token:
        raise ConfigError(
            "config error: tokens are configured (api.tokens / api.tokens_file / TASKZILLA_API_TOKEN): "
            "set TASKZILLA_MCP_TOKEN to one of them for the stdio MCP server"
        )
    try:
        return tokens.authenticate(token)
    except Unauthorized:
        raise ConfigError("config error: TASKZILLA_MCP_TOKEN matches no configured token") from None


def _listen(host: str, port: int) -> socket.socket:
    """Bound and listening before the stores open: a port in use is a config error, and a client that
    connects as soon as the URL is printed waits in the backlog instead of being refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"config error: the MCP server cannot listen on {host}:{port} ({exc.strerror}): choose another --port"
        ) from exc
    return sock


def cmd_mcp(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from zoneinfo import ZoneInfo

    import anyio

    api_token = secrets.api_token.get_secret_value() if secrets.api_token else None
    tokens = Tokens.from_settings(settings.api, api_token)
    stdio = args.transport == "stdio"
    mcp_token = secrets.mcp_token.get_secret_value() if secrets.mcp_token else None
    access = stdio_access(tokens, mcp_token) if stdio else None
    host = args.host or settings.api.host
    sock = None if stdio else _listen(host, args.port)
    # The caller and the port are checked first: a refused start costs no heavy import, no store.
    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.mcp_server import MCP_PATH, build_server, http_app
    from taskzilla_sleep.interfaces.worker import FORGET_WAIT_S
    from taskzilla_sleep.night.schedule import RealClock
    from taskzilla_sleep.runtime.lease import exclusive
    from taskzilla_sleep.service.memory_service import MemoryService

    clock = RealClock(ZoneInfo(settings.schedule.timezone))
    try:
        with build(settings, secrets) as services:
            service = MemoryService(
                settings,
                services.graph,
                services.vectors,
                services.ingestor(clock=clock.now),
                clock.now,
                exclusive=lambda: exclusive(services.graph, settings.worker.lease_ttl_s, "mcp", FORGET_WAIT_S),
                recall_pool=services.recall_pool,
            )
            server = build_server(service, access)
            if access is not None:  # stdout is the protocol's: nothing else may be printed there
                log.info("mcp_serving", transport="stdio", who=access.name, role=access.role)
                # SIGTERM (an MCP host stopping its server) ends it cleanly: the stores are closed.
                with on_sigterm(lambda: SystemExit(0)):
                    anyio.run(server.run_stdio_async)
                return 0
            import uvicorn

            assert sock is not None
            port = int(sock.getsockname()[1])
            from taskzilla_sleep.core.throttle import Throttle

            tokens.throttle = Throttle(services.instruments)  # wrong tokens from one client: it waits
            app = http_app(server, tokens, host, settings.api.max_body_bytes)
            config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5)
            uv = uvicorn.Server(config)  # a standing MCP stream cannot hold a SIGTERM for longer than 5 s
            url = f"http://{host}:{port}{MCP_PATH}"
            log.info("mcp_serving", transport="http", url=url, open=tokens.open)
            print(f"taskzilla-sleep mcp: pid {os.getpid()}, {url}, data {settings.data_dir}", flush=True)
            uv.run(sockets=[sock])
            return 0
    finally:
        if sock is not None:
            sock.close()


HANDLERS = {"mcp": cmd_mcp}
