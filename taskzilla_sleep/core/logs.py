"""The only place logging is configured: structlog, JSON when stderr is not a terminal.

Secrets never reach a log line: a processor masks values of keys that look like credentials and
any known secret value that shows up inside another field. Records from the libraries we use
(chromadb, neo4j, httpx, LiteLLM, urllib3 log through the standard ``logging`` module) are
rendered by the same processors, so they come out as the same JSON or console lines and pass the
same masker.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

_SECRET_KEYS = ("password", "token", "api_key", "apikey", "secret", "authorization")
_MASK = "**********"

# Chatty vendor loggers only speak up on warnings.
VENDOR_LOGGERS = ("chromadb", "neo4j", "httpx", "LiteLLM", "urllib3")
# LiteLLM attaches its own stream handler to these at import; see adopt_vendor_handlers.
_SELF_HANDLED_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


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


_masker = _SecretMasker(())  # replaced by configure_logging, with the secrets it is given


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, not when the handler was made
    (tests and daemons swap it), as structlog's own loggers do."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # StreamHandler.__init__ and setStream assign it; the lookup above always wins


def configure_logging(level: str = "info", json: bool | None = None, secrets: Iterable[str] = ()) -> None:
    """Configure structlog and the standard ``logging`` root. Logs go to stderr; stdout is the CLI's
    own output. Calling it again replaces the previous set-up (no second handler)."""
    global _masker
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    _masker = _SecretMasker(secrets)
    # The exception is formatted to text before the masker runs, so a secret inside an exception
    # message or a traceback line is masked too.
    tail = [structlog.processors.format_exc_info, _masker, renderer]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *tail,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        # sys.stderr is looked up for each logger, not captured once (tests and daemons swap it).
        logger_factory=lambda *_args: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )

    handler = _StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            # A standard-library record gets the fields our own events have, plus the logger's name.
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in VENDOR_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # warnings.warn (the neo4j driver's notifications and deprecations among them) would print plain
    # text straight to stderr; routed through logging ("py.warnings") it is one JSON line like the rest.
    logging.captureWarnings(True)
    adopt_vendor_handlers()


def masked(record: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``record`` as a log line would carry it: credential-like keys and known secret values masked
    (the audit file passes through here too)."""
    return _masker(None, "", record)


def audit_logger() -> Any:
    """A logger whose events are written whatever ``--log-level`` says: the audit trail's copy in the
    log stream (same processors, renderer and masker as every other event; no level filter)."""
    return structlog.wrap_logger(None, wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET))


def adopt_vendor_handlers() -> None:
    """Drop the stream handlers LiteLLM attaches to its own loggers when it is imported.

    They would print each LiteLLM record a second time, as plain text the masker never sees; once
    our handler is on the root logger the record reaches it by propagation anyway. The filters those
    handlers carried (LiteLLM redacts credential-shaped strings with one) move to the logger, so what
    they redacted stays redacted. Call it right after importing litellm (it is imported lazily); it
    does nothing until configure_logging has run.
    """
    if not any(isinstance(h, _StderrHandler) for h in logging.getLogger().handlers):
        return
    for name in _SELF_HANDLED_LOGGERS:
        logger = logging.getLogger(name)
        for vendor_handler in [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]:
            for flt in vendor_handler.filters:
                if flt not in logger.filters:
                    logger.addFilter(flt)
            logger.removeHandler(vendor_handler)
        logger.propagate = True
