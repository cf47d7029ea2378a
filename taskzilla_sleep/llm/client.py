"""``LiteLLMProvider``: the :class:`~taskzilla_sleep.llm.base.LLMProvider` protocol over any model
litellm reaches (OpenAI, Anthropic, Ollama, vLLM, any OpenAI-compatible server).

Two kinds of failure, handled differently:

- **A bad answer** (not JSON, wrong shape, or a draft ``validate_draft`` rejects) is the model's
  fault and is normal for small models: it gets ONE corrective retry (the model sees its answer
  and exactly what was wrong), then the request is answered with :class:`Unanswered` (the steps
  ask it again at the next run, a bounded number of times). Counted in ``usage``
  (``invalid_answers``, ``retries``, ``skipped``), logged, never raised.
- **A transport failure** (429, 5xx, timeout, connection refused) is retried with exponential
  backoff and jitter up to ``max_retries`` times, then raises :class:`LLMError`: a step that can't
  reach its model fails loudly and the pipeline records it. Any other 4xx (bad key, unknown
  model, bad request) can't get better by waiting and raises at once.

API keys are litellm's business: it reads them from the environment; nothing here sees them.
"""

from __future__ import annotations

import contextvars
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel

from taskzilla_sleep.errors import ConfigError, LLMError
from taskzilla_sleep.llm.base import (
    DistillRequest,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
    validate_draft,
)
from taskzilla_sleep.llm.prompts import (
    DISTILL,
    REFLECT,
    REFLECT_MAX_TOKENS,
    ChatMessage,
    DistillAnswer,
    InvalidAnswer,
    Prompt,
    distill_max_tokens,
    distill_messages,
    reflect_messages,
)

log = structlog.get_logger(__name__)

ReqT = TypeVar("ReqT")
ResT = TypeVar("ResT")
AnswerT = TypeVar("AnswerT", bound=BaseModel)

_ERROR_TEXT_CHARS = 300  # vendor messages can be long; the start says what happened


@dataclass(frozen=True)
class _Reply:
    content: str | None
    truncated: bool  # the model hit max_tokens: tell it to be shorter, not just "bad JSON"


class LiteLLMProvider:
    """Distill and classify through ``litellm.completion``; see the module docstring for failures."""

    def __init__(
        self,
        model: str,
        api_base: str | None,
        timeout_s: float,
        max_retries: int,
        max_concurrency: int,
        temperature: float,
        json_schema: bool = True,
        *,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
    ) -> None:
        if not model:
            raise ConfigError("llm.model is empty")
        if timeout_s <= 0 or max_retries < 0 or max_concurrency < 1 or backoff_base_s < 0 or backoff_max_s < 0:
            raise ConfigError("llm: timeout_s must be > 0, max_retries >= 0, max_concurrency >= 1, backoff delays >= 0")
        self.name = model
        self.usage = LLMUsage()
        self._model = model
        self._api_base = api_base
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._max_concurrency = max_concurrency
        self._temperature = temperature
        self._json_schema = json_schema
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s

    # -- the protocol -----------------------------------------------------------------------

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[PatternDraft | Unanswered | None]:
        return self._run_all(requests, self._distill_one)

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        return self._run_all(requests, self._classify_one)

    # -- one request --------------------------------------------------------------------------

    def _distill_one(self, req: DistillRequest, abort: threading.Event) -> PatternDraft | Unanswered | None:
        if len({e.id for e in req.episodes}) < req.min_support:
            # No answer could pass validate_draft: don't pay for the question.
            log.debug("llm_distill_group_too_small", group=req.group_key, episodes=len(req.episodes))
            return None

        def check(answer: DistillAnswer) -> str | None:
            return validate_draft(req, answer.pattern) if answer.pattern is not None else None

        answer = self._ask(
            DISTILL, distill_messages(req), distill_max_tokens(req), check, abort, {"group": req.group_key}
        )
        return answer if isinstance(answer, Unanswered) else answer.pattern

    def _classify_one(self, req: ReflectRequest, abort: threading.Event) -> Verdict | Unanswered:
        return self._ask(
            REFLECT, reflect_messages(req), REFLECT_MAX_TOKENS, _accept, abort, {"new": req.new.id, "old": req.old.id}
        )

    def _ask(
        self,
        prompt: Prompt[AnswerT],
        messages: list[ChatMessage],
        max_tokens: int,
        check: Callable[[AnswerT], str | None],
        abort: threading.Event,
        context: dict[str, str],
    ) -> AnswerT | Unanswered:
        """The validated answer, after at most one corrective retry; Unanswered when it stays invalid."""
        reason = ""
        for attempt in (1, 2):
            reply = self._complete(prompt, messages, max_tokens, abort)
            answer, reason = _judge(prompt, reply, check)
            if answer is not None:
                return answer
            self.usage.add("invalid_answers")
            log.warning("llm_invalid_answer", kind=prompt.name, reason=reason, attempt=attempt, **context)
            if attempt == 1:
                self.usage.add("retries")
                messages = [*messages, {"role": "assistant", "content": reply.content or ""}, prompt.correction(reason)]
        self.usage.add("skipped")
        log.warning("llm_answer_skipped", kind=prompt.name, reason=reason, **context)
        return Unanswered(reason)

    def _complete(
        self, prompt: Prompt[Any], messages: list[ChatMessage], max_tokens: int, abort: threading.Event
    ) -> _Reply:
        """One answer from the model, retrying transport failures; LLMError when they persist."""
        litellm = _import_litellm()
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "temperature": self._temperature,
            "max_tokens": max_tokens,
            "timeout": self._timeout_s,
            # This loop is the only retry layer: the OpenAI SDK's and litellm's own retries would
            # hide 429s and 5xx from our backoff and multiply the attempts.
            "max_retries": 0,
            "num_retries": 0,
            # A model that rejects a parameter (e.g. temperature on reasoning models) gets the call
            # without it instead of a 400; the answer is validated either way.
            "drop_params": True,
        }
        if self._api_base:
            kwargs["api_base"] = self._api_base
        response_format = prompt.response_format(self._json_schema)
        if response_format is not None:
            kwargs["response_format"] = response_format

        attempt = 0
        while True:
            if abort.is_set():
                raise LLMError(f"{prompt.name} request abandoned: another request of this run failed")
            started = time.monotonic()
            try:
                response = litellm.completion(**kwargs)
            except Exception as exc:  # litellm maps every vendor error to its own types; sorted below
                status = getattr(exc, "status_code", None)
                if not _is_transient(litellm, exc) or attempt >= self._max_retries:
                    log.warning(
                        "llm_request_failed",
                        kind=prompt.name,
                        error=type(exc).__name__,
                        status=status,
                        attempts=attempt + 1,
                    )
                    raise LLMError(
                        f"{prompt.name} request to {self._model} failed after {attempt + 1} attempt(s): {_brief(exc)}"
                    ) from exc
                delay = self._backoff_delay(attempt, exc)
                attempt += 1
                log.warning(
                    "llm_transport_retry",
                    kind=prompt.name,
                    error=type(exc).__name__,
                    status=status,
                    attempt=attempt,
                    delay_s=round(delay, 3),
                )
                if abort.wait(delay):
                    raise LLMError(f"{prompt.name} request abandoned: another request of this run failed") from exc
                continue
            return self._record(litellm, prompt, response, time.monotonic() - started)

    def _record(self, litellm: Any, prompt: Prompt[Any], response: Any, duration_s: float) -> _Reply:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:  # raised for models missing from litellm's price map: unknown, not an error
            cost = None
        self.usage.add_call(prompt_tokens, completion_tokens, cost)
        choices = getattr(response, "choices", None) or []
        content = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        finish_reason = getattr(choices[0], "finish_reason", None) if choices else None
        log.debug(
            "llm_call",
            kind=prompt.name,
            model=self._model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            duration_s=round(duration_s, 3),
        )
        return _Reply(content if isinstance(content, str) else None, finish_reason == "length")

    def _backoff_delay(self, attempt: int, exc: BaseException) -> float:
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2**attempt)
        # Jitter: requests that failed together (one 429 burst) must not all come back together.
        delay = random.uniform(ceiling / 2, ceiling)
        hint = _retry_after_s(exc)
        return max(delay, min(hint, self._backoff_max_s)) if hint is not None else delay

    # -- many requests ------------------------------------------------------------------------

    def _run_all(self, items: Sequence[ReqT], one: Callable[[ReqT, threading.Event], ResT]) -> list[ResT]:
        """``one`` over every item, at most ``max_concurrency`` at a time; results in item order.

        The first LLMError (or bug) stops the run: queued requests are cancelled, retrying ones
        give up, in-flight ones finish (bounded by the timeout), then that first error is raised.
        """
        abort = threading.Event()
        workers = min(self._max_concurrency, len(items))
        if workers <= 1:
            return [one(item, abort) for item in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            # Each task runs in a copy of the caller's context so structlog's bound run_id/step
            # reach the log lines written from the pool's threads.
            futures: list[Future[ResT]] = [
                pool.submit(contextvars.copy_context().run, one, item, abort) for item in items
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            error = next((e for e in (f.exception() for f in futures if f in done) if e is not None), None)
            if error is not None:
                abort.set()
                for future in futures:
                    future.cancel()
                raise error
            return [f.result() for f in futures]


def _judge(
    prompt: Prompt[AnswerT], reply: _Reply, check: Callable[[AnswerT], str | None]
) -> tuple[AnswerT | None, str]:
    """(answer, "") when the reply is usable, else (None, what is wrong with it)."""
    try:
        answer = prompt.parse(reply.content, truncated=reply.truncated)
    except InvalidAnswer as exc:
        return None, exc.reason
    problem = check(answer)
    return (answer, "") if problem is None else (None, problem)


def _accept(_answer: Verdict) -> str | None:
    return None  # a verdict that parsed is acceptable: the schema already limits the relation


def _is_transient(litellm: Any, exc: BaseException) -> bool:
    if isinstance(exc, litellm.Timeout | litellm.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)


def _retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After in seconds, when it sent one (dates are ignored: rare for APIs)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
        return max(0.0, float(value)) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:_ERROR_TEXT_CHARS]}"


def _import_litellm() -> Any:
    # litellm fetches its price map from the network at import unless told not to, and takes
    # ~3 s to import: import it only when a hosted model is actually asked something.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # Otherwise litellm prints "Give Feedback / Get Help" banners to stdout on every error.
    litellm.suppress_debug_info = True
    return litellm
