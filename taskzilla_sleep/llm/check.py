"""Is the configured model usable? One cheap call through litellm, before a night needs it.

``check_model`` asks the model a tiny question (``max_tokens`` small, a short timeout, no retry) and
says "model ok" or what is wrong, naming what to fix: ``llm.model`` (a provider litellm does not know,
a model the provider does not serve), an environment variable (a key missing or refused), or
``llm.api_base`` (the server does not answer). With no model configured the offline provider judges:
nothing to call, and that is ok. Used by ``taskzilla-sleep check``, ``status`` and the worker (at
start, in ``/readyz``, ``GET /v1/status`` and the ``taskzilla_sleep_llm_up`` gauge through
:class:`CachedModelCheck`, so probes and scrapes never call the model themselves).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from taskzilla_sleep.core.models import iso_time
from taskzilla_sleep.core.settings import LLMSettings
from taskzilla_sleep.llm.client import _import_litellm, placeholder_key

log = structlog.get_logger(__name__)

CHECK_TIMEOUT_S = 15.0  # at most: a model that takes longer for 4 tokens fails the night's calls too
CHECK_MAX_TOKENS = 4
CHECK_PROMPT = "Reply with the single word: ok"
# How long a result is reused: a good one for 10 min (a probe every 10 s costs one call in 60), a
# failure for 1 min (a fixed key shows up fast; a broken model is not asked more than once a minute).
OK_TTL_S = 600.0
FAILED_TTL_S = 60.0
_DETAIL_CHARS = 300


@dataclass(frozen=True)
class ModelCheck:
    """The verdict: ``ok``, one line saying what (``detail``) and, when not ok, what to change (``fix``:
    a setting such as ``llm.model`` or an environment variable such as ``OPENAI_API_KEY``)."""

    ok: bool
    model: str | None
    detail: str
    fix: str | None = None
    checked_at: datetime | None = None
    duration_s: float = 0.0

    def line(self) -> str:
        """What ``check`` and ``status`` print."""
        if self.ok:
            return self.detail
        return f"{self.detail} (fix: {self.fix})" if self.fix else self.detail

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "model": self.model,
            "detail": self.detail,
            "fix": self.fix,
            "checked_at": iso_time(self.checked_at) if self.checked_at else None,  # as every time leaves
        }


def check_model(settings: LLMSettings) -> ModelCheck:
    """One call to ``settings.model`` (none with the offline provider); never raises."""
    now = datetime.now(UTC)
    model = settings.model
    if model is None:
        return ModelCheck(
            True, None, "no model configured (llm.model): the offline provider judges, nothing to call", None, now
        )
    started = time.monotonic()
    try:
        found = _ask(settings, model)
    except Exception as exc:  # every failure is a verdict here, never a crash of the caller
        found = ModelCheck(False, model, f"model check failed: {_brief(exc)}", "llm.model", now)
    took = round(time.monotonic() - started, 3)
    verdict = ModelCheck(found.ok, model, found.detail, found.fix, now, took)
    if verdict.ok:
        log.info("llm_check_ok", model=model, duration_s=took)
    else:
        log.error("llm_check_failed", model=model, detail=verdict.detail, fix=verdict.fix, duration_s=took)
    return verdict


def _ask(settings: LLMSettings, model: str) -> ModelCheck:
    litellm = _import_litellm()
    now = datetime.now(UTC)
    api_base = settings.api_base
    try:
        provider = str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception as exc:  # litellm cannot place the name: no call can work
        return ModelCheck(
            False,
            model,
            f"litellm knows no provider for model {model!r} ({_brief(exc, 120)}): name it as provider/model, "
            "e.g. openai/gpt-4o-mini",
            "llm.model",
            now,
        )
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": CHECK_PROMPT}],
        "max_tokens": CHECK_MAX_TOKENS,
        "timeout": min(settings.timeout_s, CHECK_TIMEOUT_S),
        "max_retries": 0,
        "num_retries": 0,
        "drop_params": True,
    }
    if api_base:
        kwargs["api_base"] = api_base
        placeholder = placeholder_key(litellm, model, api_base)
        if placeholder is not None:
            kwargs["api_key"] = placeholder
    else:
        missing = _missing_keys(litellm, model)
        if missing:
            names = ", ".join(missing)
            return ModelCheck(
                False, model, f"no API key for {model}: {names} is not set in the environment", missing[0], now
            )
        key = f"{provider.upper()}_API_KEY"
        if key in os.environ and not os.environ[key].strip():  # compose's ${VAR} of an unset VAR: present, empty
            return ModelCheck(False, model, f"no API key for {model}: {key} is set but empty", key, now)
    try:
        litellm.completion(**kwargs)
    except Exception as exc:  # sorted into what to fix below
        return _verdict(litellm, exc, model, provider, api_base, now)
    where = f" at {api_base}" if api_base else ""
    return ModelCheck(True, model, f"model ok ({model}{where} answered)", None, now)


def _missing_keys(litellm: Any, model: str) -> list[str]:
    try:
        found = litellm.validate_environment(model=model)
    except Exception:  # a model litellm cannot place: the call says what is wrong
        return []
    return [str(k) for k in found.get("missing_keys") or []]


def _verdict(
    litellm: Any, exc: Exception, model: str, provider: str, api_base: str | None, now: datetime
) -> ModelCheck:
    key = f"{provider.upper()}_API_KEY"
    status = getattr(exc, "status_code", None)
    if isinstance(exc, litellm.AuthenticationError) or status in (401, 403):
        return ModelCheck(False, model, f"the {provider} API refused the key: {_brief(exc)}", key, now)
    if isinstance(exc, litellm.NotFoundError) or status == 404:
        return ModelCheck(False, model, f"the {provider} API does not serve {model}: {_brief(exc)}", "llm.model", now)
    unreachable = (
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
    )
    if isinstance(exc, unreachable) or (isinstance(status, int) and status >= 500):
        where = api_base or f"the {provider} API"
        fix = "llm.api_base" if api_base else "network access to the provider"
        return ModelCheck(False, model, f"{where} does not answer or failed: {_brief(exc)}", fix, now)
    if status == 429:
        return ModelCheck(False, model, f"rate limited or out of quota (429): {_brief(exc)}", key, now)
    if isinstance(exc, litellm.BadRequestError) or status == 400:
        return ModelCheck(False, model, f"the {provider} API rejected the request: {_brief(exc)}", "llm.model", now)
    return ModelCheck(False, model, f"model call failed: {_brief(exc)}", "llm.model", now)


def _brief(exc: BaseException, chars: int = _DETAIL_CHARS) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:chars]}"


class CachedModelCheck:
    """The last verdict, reused for ``OK_TTL_S`` (ok) or ``FAILED_TTL_S`` (failed); ``current()``
    checks again once it is older. One check at a time: callers arriving meanwhile get the previous
    verdict (None before the first), so a probe never waits on another's call."""

    def __init__(
        self,
        settings: LLMSettings,
        check: Callable[[LLMSettings], ModelCheck] = check_model,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._check = check
        self._clock = clock
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        self._last: ModelCheck | None = None
        self._at = 0.0

    def last(self) -> ModelCheck | None:
        with self._lock:
            return self._last

    def up(self) -> bool | None:
        last = self.last()
        return None if last is None else last.ok

    def current(self) -> ModelCheck | None:
        with self._lock:
            last, at = self._last, self._at
        if last is not None and self._clock() - at < (OK_TTL_S if last.ok else FAILED_TTL_S):
            return last
        if not self._busy.acquire(blocking=last is None):
            return last  # another caller is checking: its verdict lands shortly
        try:
            verdict = self._check(self._settings)
            with self._lock:
                self._last, self._at = verdict, self._clock()
            return verdict
        finally:
            self._busy.release()


__all__ = ["FAILED_TTL_S", "OK_TTL_S", "CachedModelCheck", "ModelCheck", "check_model"]
