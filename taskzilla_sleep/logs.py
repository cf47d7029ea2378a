"""The only place logging is configured: structlog, JSON when stderr is not a terminal.

Secrets never reach a log line: a processor masks values of keys that look like credentials and
any known secret value that shows up inside another field.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = ("password", "token", "api_key", "apikey", "secret", "authorization")
_MASK = "**********"


class _SecretMasker:
    def __init__(self, secrets: Iterable[str]) -> None:
        self._values = [s for s in secrets if len(s) >= 4]

    def __call__(self, _logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            if any(k in key.lower() for k in _SECRET_KEYS):
                event[key] = _MASK
            elif isinstance(value, str) and self._values:
                for s in self._values:
                    if s in value:
                        value = value.replace(s, _MASK)
                event[key] = value
        return event


def configure_logging(level: str = "info", json: bool | None = None, secrets: Iterable[str] = ()) -> None:
    """Configure structlog once per process. Logs go to stderr; stdout is the CLI's own output."""
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _SecretMasker(secrets),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        # sys.stderr is looked up for each logger, not captured once (tests and daemons swap it).
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Chatty vendor loggers (chromadb, neo4j, httpx) only speak up on warnings.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("chromadb", "neo4j", "httpx", "LiteLLM", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
