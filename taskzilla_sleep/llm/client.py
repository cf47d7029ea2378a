"""``LiteLLMProvider``: the :class:`~taskzilla_sleep.llm.base.LLMProvider` protocol over any model
litellm reaches (OpenAI, Anthropic, Ollama, vLLM, any OpenAI-compatible server).

Calls are batched: DISTILL asks up to ``batch_groups`` groups in one call, REFLECT one new belief
against all its candidates (up to ``MAX_CANDIDATES``). Each item of an answer is validated on its
own, so a bad item costs only itself.

Two kinds of failure, handled differently:

- **A bad answer** (not JSON, wrong shape, or a draft ``validate_draft`` rejects) is the model's
  fault and is normal for small models. A batch whose answer is unusable as a whole is halved and
  each half asked again; an unusable item is asked again alone. A request asked alone gets ONE
  corrective retry (the model sees its answer and exactly what was wrong), then it is answered
  with :class:`Unanswered` (the steps ask it again at the next run, a bounded number of times).
  Counted in ``usage`` (``invalid_answers``, ``retries``, ``skipped``), logged, never raised.
- **A transport failure** (429, 5xx, timeout, connection refused) is retried with exponential
  backoff and jitter up to ``max_retries`` times, then raises :class:`LLMError`: a step that can't
  reach its model fails loudly and the pipeline records it. Any other 4xx (bad key, unknown
  model, bad request) can't get better by waiting and raises at once.

API keys are litellm's business: it reads them from the environment; nothing here sees them. One
exception: a server on this machine (``llm.api_base`` on 127.0.0.1, ::1 or localhost, such as
llama.cpp's server or the oracle in ``ops/bench/oracle.py``) usually wants no key, but litellm's
``openai/`` provider refuses to call without one; when the environment holds none for the model's
provider, such a call carries the harmless :data:`LOOPBACK_PLACEHOLDER_KEY` (never logged, never
sent anywhere but the loopback server).
"""

from __future__ import annotations

import contextvars
import ipaddress
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import structlog

from taskzilla_sleep.core.errors import ConfigError, LLMError
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.logs import adopt_vendor_handlers
from taskzilla_sleep.llm.base import (
    DistillRequest,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
)
from taskzilla_sleep.llm.prompts.distill import (
    DISTILL,
    distill_batches,
    distill_items,
    distill_max_tokens,
    distill_messages,
)
from taskzilla_sleep.llm.prompts.reflect import (
    MAX_CANDIDATES,
    REFLECT,
    reflect_items,
    reflect_max_tokens,
    reflect_messages,
)
from taskzilla_sleep.llm.prompts.shared import ChatMessage, InvalidAnswer, Items, Prompt

log = structlog.get_logger(__name__)

ReqT = TypeVar("ReqT")
ResT = TypeVar("ResT")

_ERROR_TEXT_CHARS = 300  # vendor messages can be long; the start says what happened
# What a call to a loopback server carries when no key is configured: the OpenAI SDK insists on one.
LOOPBACK_PLACEHOLDER_KEY = "sk-loopback-no-key"


@dataclass(frozen=True)
class _Reply:
    content: str | None
    truncated: bool  # the model hit max_tokens: tell it to be shorter, not just "bad JSON"


@dataclass(frozen=True)
class _Contract(Generic[ReqT, ResT]):
    """How one prompt is asked about a batch of requests and how its answer splits into items."""

    prompt: Prompt
    messages: Callable[[Sequence[ReqT]], list[ChatMessage]]
    max_tokens: Callable[[Sequence[ReqT]], int]
    items: Callable[[Items, Sequence[ReqT]], list[ResT | str]]  # per request: the result, or why not
    context: Callable[[Sequence[ReqT]], dict[str, str]]


_DISTILL = _Contract[DistillRequest, tuple[PatternDraft, ...]](
    DISTILL,
    distill_messages,
    distill_max_tokens,
    distill_items,
    lambda b: {"groups": ",".join(r.group_key for r in b)},
)
_REFLECT = _Contract[ReflectRequest, Verdict](
    REFLECT,
    reflect_messages,
    reflect_max_tokens,
    reflect_items,
    lambda b: {"new": b[0].new.id, "old": ",".join(r.old.id for r in b)},
)


class LiteLLMProvider:
    """Distill and classify through ``litellm.completion``; see the module docstring for failures."""

    prompt_ids: Mapping[str, str] = MappingProxyType({"distill": DISTILL.id, "reflect": REFLECT.id})
    languages: frozenset[str] | None = None  # a model reads whatever its teams write

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
        batch_groups: int = 8,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        instruments: Instruments | None = None,
    ) -> None:
        if not model:
            raise ConfigError("llm.model is empty")
        if timeout_s <= 0 or max_retries < 0 or max_concurrency < 1 or backoff_base_s < 0 or backoff_max_s < 0:
            raise ConfigError("llm: timeout_s must be > 0, max_retries >= 0, max_concurrency >= 1, backoff delays >= 0")
        if batch_groups < 1:
            raise ConfigError("llm.batch_groups must be >= 1")
        self.name = model
        self.usage = LLMUsage()
        self._model = model
        self._api_base = api_base
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency)  # shared by every caller's requests
        self._temperature = temperature
        self._json_schema = json_schema
        self._batch_groups = batch_groups
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._instruments = instruments  # calls, errors, tokens and skips for /metrics (None: not counted)
        self._placeholder: str | None = None  # the key a loopback server gets when none is configured
        self._placeholder_checked = False

    # -- the protocol -----------------------------------------------------------------------

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        """Batched by ``distill_batches`` (topics and messages a call); a topic too small for any
        valid answer is not asked."""
        batches = distill_batches(requests, self._batch_groups)
        answers = self._answer(_DISTILL, requests, batches)
        return [answers.get(i, ()) for i in range(len(requests))]

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        """One call per new belief with up to MAX_CANDIDATES old ones (requests sharing ``new.id``)."""
        by_new: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            by_new.setdefault(r.new.id, []).append(i)
        batches = [ix[k : k + MAX_CANDIDATES] for ix in by_new.values() for k in range(0, len(ix), MAX_CANDIDATES)]
        answers = self._answer(_REFLECT, requests, batches)
        return [answers[i] for i in range(len(requests))]

    def _answer(
        self, c: _Contract[ReqT, ResT], requests: Sequence[ReqT], batches: list[list[int]]
    ) -> dict[int, ResT | Unanswered]:
        """The answer to each request of ``batches`` (lists of indexes into ``requests``), by index."""
        results = self._run_all([[requests[i] for i in b] for b in batches], lambda b, abort: self._batch(c, b, abort))
        answers = {i: got for idx, res in zip(batches, results, strict=True) for i, got in zip(idx, res, strict=True)}
        if self._instruments is not None:
            skipped = sum(1 for got in answers.values() if isinstance(got, Unanswered))
            requests_of = self._instruments.llm_requests
            requests_of.labels(c.prompt.name, "answered").inc(len(answers) - skipped)
            requests_of.labels(c.prompt.name, "skipped").inc(skipped)
        return answers

    # -- one batch ----------------------------------------------------------------------------

    def _batch(
        self, c: _Contract[ReqT, ResT], batch: Sequence[ReqT], abort: threading.Event
    ) -> list[ResT | Unanswered]:
        """Every request of ``batch`` answered in one call when the answer allows: an item that is
        unusable is asked again alone (with its corrective retry), a call whose answer is unusable
        as a whole is halved. A bad item costs only itself."""
        if len(batch) == 1:
            alone = self._one(c, batch[0], abort)
            return [alone]
        reply = self._complete(c.prompt, c.messages(batch), c.max_tokens(batch), abort, len(batch))
        try:
            parsed = c.prompt.parse(reply.content, truncated=reply.truncated)
        except InvalidAnswer as exc:
            self._invalid(c.prompt.name)
            log.warning("llm_invalid_batch", kind=c.prompt.name, reason=exc.reason, size=len(batch), **c.context(batch))
            half = len(batch) // 2
            return self._batch(c, batch[:half], abort) + self._batch(c, batch[half:], abort)
        out: list[ResT | Unanswered] = []
        for req, item in zip(batch, c.items(parsed, batch), strict=True):
            if isinstance(item, str):
                self._invalid(c.prompt.name)
                log.warning("llm_invalid_item", kind=c.prompt.name, reason=item, **c.context([req]))
                again = self._one(c, req, abort)
                out.append(again)
            else:
                out.append(item)
        return out

    def _one(self, c: _Contract[ReqT, ResT], req: ReqT, abort: threading.Event) -> ResT | Unanswered:
        """One request alone, after at most one corrective retry; Unanswered when it stays invalid."""
        messages = c.messages([req])
        reason = ""
        for attempt in (1, 2):
            reply = self._complete(c.prompt, messages, c.max_tokens([req]), abort, 1)
            try:
                item = c.items(c.prompt.parse(reply.content, truncated=reply.truncated), [req])[0]
            except InvalidAnswer as exc:
                item = exc.reason
            if not isinstance(item, str):
                return item
            reason = item
            self._invalid(c.prompt.name)
            log.warning("llm_invalid_answer", kind=c.prompt.name, reason=reason, attempt=attempt, **c.context([req]))
            if attempt == 1:
                self.usage.add("retries")
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply.content or ""},
                    c.prompt.correction(reason),
                ]
        self.usage.add("skipped")
        log.warning("llm_answer_skipped", kind=c.prompt.name, reason=reason, **c.context([req]))
        return Unanswered(reason)

    def _complete(
        self, prompt: Prompt, messages: list[ChatMessage], max_tokens: int, abort: threading.Event, items: int
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
            placeholder = self._loopback_key(litellm)
            if placeholder is not None:
                kwargs["api_key"] = placeholder
        response_format = prompt.response_format(self._json_schema, items)
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
                if self._instruments is not None:
                    self._instruments.llm_errors.labels(prompt.name, "transport").inc()
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

    def _record(self, litellm: Any, prompt: Prompt, response: Any, duration_s: float) -> _Reply:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:  # raised for models missing from litellm's price map: unknown, not an error
            cost = None
        self.usage.add_call(prompt_tokens, completion_tokens, cost)
        if self._instruments is not None:
            self._instruments.llm_answered(prompt.name, prompt_tokens, completion_tokens, duration_s)
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

    def _loopback_key(self, litellm: Any) -> str | None:
        if not self._placeholder_checked:  # once: the environment is read at the first call
            self._placeholder = placeholder_key(litellm, self._model, self._api_base)
            self._placeholder_checked = True
            if self._placeholder is not None:
                log.info("llm_loopback_without_key", model=self._model, api_base=self._api_base)
        return self._placeholder

    def _invalid(self, kind: str) -> None:
        self.usage.add("invalid_answers")
        if self._instruments is not None:
            self._instruments.llm_errors.labels(kind, "invalid_answer").inc()

    def _backoff_delay(self, attempt: int, exc: BaseException) -> float:
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2**attempt)
        # Jitter: requests that failed together (one 429 burst) must not all come back together.
        delay = random.uniform(ceiling / 2, ceiling)
        hint = _retry_after_s(exc)
        return max(delay, min(hint, self._backoff_max_s)) if hint is not None else delay

    # -- many requests ------------------------------------------------------------------------

    def _shared(self, one: Callable[[ReqT, threading.Event], ResT]) -> Callable[[ReqT, threading.Event], ResT]:
        """``one`` holding a slot of the client's ``max_concurrency``: the worker's concurrent team jobs
        share the bound (one client per process), they do not multiply it."""

        def limited(item: ReqT, abort: threading.Event) -> ResT:
            with self._slots:
                return one(item, abort)

        return limited

    def _run_all(self, items: Sequence[ReqT], one: Callable[[ReqT, threading.Event], ResT]) -> list[ResT]:
        """``one`` over every item, at most ``max_concurrency`` at a time; results in item order.

        The first LLMError (or bug) stops the run: queued requests are cancelled, retrying ones
        give up, in-flight ones finish (bounded by the timeout), then that first error is raised.
        """
        abort = threading.Event()
        workers = min(self._max_concurrency, len(items))
        one = self._shared(one)
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


def is_loopback(api_base: str | None) -> bool:
    """``api_base`` names a server on this machine: 127.0.0.0/8, ::1 or localhost."""
    try:
        host = urlsplit(api_base).hostname if api_base else None
    except ValueError:
        return False
    if not host:
        return False
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def placeholder_key(litellm: Any, model: str, api_base: str | None) -> str | None:
    """:data:`LOOPBACK_PLACEHOLDER_KEY` for a loopback ``api_base`` when litellm finds no key for the
    model's provider in the environment; None otherwise (a configured key is always the one sent)."""
    if not is_loopback(api_base):
        return None
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # a model litellm cannot place: let the call say what is wrong
        return None
    return LOOPBACK_PLACEHOLDER_KEY if found.get("missing_keys") else None


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
    # Its records then go out through our masked log lines only, not also through its own handler.
    adopt_vendor_handlers()
    return litellm
