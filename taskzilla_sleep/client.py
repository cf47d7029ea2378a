"""A typed client of the worker's HTTP API (``/v1``) for Python bots: one method an operation, the
package's own models back (never dicts), one :class:`ApiError` for every failure.

    with Client("http://127.0.0.1:8765", token=os.environ["BOT_TOKEN"], team="platform") as tz:
        tz.ingest([EpisodeIn(team="platform", channel="dev", author="sara", text="...", ts=now,
                             provenance=Provenance.HUMAN)])
        for item in tz.recall("do we deploy on fridays?").items:
            print(item.render())

``team`` is the default team of every call that names one; the token is sent as a bearer token and
never appears in a repr, a log line or an error. Synchronous, over httpx.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from taskzilla_sleep.core.errors import TaskzillaError
from taskzilla_sleep.core.models import Contradiction, EpisodeIn, Pattern, PatternStatus
from taskzilla_sleep.interfaces.api.errors import ErrorResponse, ItemError
from taskzilla_sleep.interfaces.api.schemas import Health, IngestResult, Readiness, RecallResult
from taskzilla_sleep.memory.admin import ForgetReport, PatternDetail, PatternSummary
from taskzilla_sleep.service.memory_service import ContradictionView

M = TypeVar("M")
Keep = Literal["new", "old", "both"]
Include = Literal["drafts", "superseded"]


class ApiError(TaskzillaError):
    """The worker refused or failed a call: its HTTP status, the error shape's ``code``, ``message``
    and ``details`` (which episode of a batch, which field, why), and ``retry_after`` seconds on 429.
    A worker that cannot be reached is status 0, code ``unreachable``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Sequence[ItemError] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details)
        self.retry_after = retry_after

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        retry = _seconds(response.headers.get("Retry-After"))
        try:
            body = ErrorResponse.model_validate_json(response.content).error
        except ValidationError:  # not the worker's shape (a proxy's page): the status and a snippet
            code = f"http_{response.status_code}"
            return cls(response.status_code, code, response.text[:500] or response.reason_phrase, (), retry)
        return cls(response.status_code, body.code, body.message, body.details or (), retry)


class Client:
    """One worker, one token, optionally a default team. Use as a context manager (or ``close()``)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        team: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self.team = team
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def __repr__(self) -> str:  # never the token
        return f"Client({self.base_url!r}, team={self.team!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- probes (no token needed) ----------------------------------------------------------------
    def health(self) -> Health:
        return self._call("GET", "/healthz", Health)

    def ready(self) -> Readiness:
        """Whether the stores answer; a 503 "not ready" is an answer here, not an error."""
        response = self._send("GET", "/readyz")
        if response.status_code == 503:
            try:
                return Readiness.model_validate_json(response.content)
            except ValidationError:
                pass
        return self._parse(response, Readiness)

    def metrics(self) -> str:
        """The Prometheus exposition text."""
        response = self._send("GET", "/metrics")
        if response.status_code != 200:
            raise ApiError.of(response)
        return response.text

    # -- memory -----------------------------------------------------------------------------------
    def ingest(self, episodes: Iterable[EpisodeIn | Mapping[str, Any]]) -> IngestResult:
        """Store a batch, all or nothing (422 with the bad items in ``details``); a re-sent episode
        is counted as ``present``. Plain mappings are sent as they are, for the worker to judge."""
        batch = [
            e.model_dump(mode="json", exclude_none=True) if isinstance(e, EpisodeIn) else dict(e) for e in episodes
        ]
        return self._call("POST", "/v1/episodes", IngestResult, json={"episodes": batch})

    def recall(
        self,
        q: str,
        *,
        team: str | None = None,
        entity: str | None = None,
        k: int = 5,
        include: Iterable[Include] = (),
        format: Literal["json", "prompt"] = "json",
        budget: int | None = None,
    ) -> RecallResult:
        """Pinned facts, then beliefs, raw episodes only as fallback; ``format="prompt"`` also fills
        ``prompt``, a block for a model's system prompt within ``budget`` tokens."""
        params: list[tuple[str, str | int]] = [("q", q), ("k", k), ("format", format)]
        params += [("include", x) for x in include]
        params += self._opt(team=self._team(team), entity=entity, budget=budget)
        return self._call("GET", "/v1/recall", RecallResult, params=params)

    def contradictions(
        self, status: Literal["open", "resolved"] = "open", *, team: str | None = None
    ) -> list[ContradictionView]:
        params = [("status", status), *self._opt(team=self._team(team))]
        return self._call("GET", "/v1/contradictions", list[ContradictionView], params=params)

    def contradiction(self, contradiction_id: str) -> ContradictionView:
        return self._call("GET", f"/v1/contradictions/{_seg(contradiction_id)}", ContradictionView)

    def resolve(self, contradiction_id: str, keep: Keep, note: str | None = None) -> Contradiction:
        """A person's decision, recorded as made by the token's name (409 if decided otherwise)."""
        body: dict[str, Any] = {"keep": keep} | ({"note": note} if note is not None else {})
        return self._call("POST", f"/v1/contradictions/{_seg(contradiction_id)}/resolve", Contradiction, json=body)

    def facts(self, *, team: str | None = None) -> list[Pattern]:
        return self._call("GET", "/v1/facts", list[Pattern], params=self._opt(team=self._team(team)))

    def pin(self, text: str, *, entity: str | None = None, team: str | None = None) -> Pattern:
        body = {"text": text} | dict(self._opt(team=self._team(team), entity=entity))
        return self._call("POST", "/v1/facts", Pattern, json=body)

    def unpin(self, fact_id: str) -> Pattern:
        return self._call("DELETE", f"/v1/facts/{_seg(fact_id)}", Pattern)

    def patterns(
        self, *, team: str | None = None, status: PatternStatus | None = None, limit: int = 50, offset: int = 0
    ) -> list[PatternSummary]:
        params = [("limit", limit), ("offset", offset), *self._opt(team=self._team(team), status=status)]
        return self._call("GET", "/v1/patterns", list[PatternSummary], params=params)

    def pattern(self, pattern_id: str, *, team: str | None = None) -> PatternDetail:
        params = self._opt(team=self._team(team))
        return self._call("GET", f"/v1/patterns/{_seg(pattern_id)}", PatternDetail, params=params)

    def forget(
        self,
        reason: str,
        *,
        episode_id: str | None = None,
        author: str | None = None,
        pattern_id: str | None = None,
        team: str | None = None,
    ) -> ForgetReport:
        """Forget exactly one of: an episode, every episode of an author, a pattern. 429 (with
        ``retry_after``) when a night holds the memory for longer than the worker waits."""
        body = {"reason": reason} | dict(
            self._opt(team=self._team(team), episode_id=episode_id, author=author, pattern_id=pattern_id)
        )
        return self._call("POST", "/v1/forget", ForgetReport, json=body)

    def export(self, *, team: str | None = None) -> list[dict[str, Any]]:
        """The team's whole memory (admin), one object a JSONL line: the file ``import`` reads."""
        response = self._send("GET", "/v1/export", params=self._opt(team=self._team(team)))
        if response.status_code != 200:
            raise ApiError.of(response)
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    def status(self) -> dict[str, Any]:
        """Store sizes, backends, schedule and the last runs of every team (admin)."""
        return self._call("GET", "/v1/status", dict[str, Any])

    # -- plumbing ---------------------------------------------------------------------------------
    def _team(self, team: str | None) -> str | None:
        return team or self.team

    @staticmethod
    def _opt(**values: object) -> list[tuple[str, str]]:
        return [(k, str(v)) for k, v in values.items() if v is not None]

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:  # the message names the URL, never a header
            raise ApiError(0, "unreachable", f"{method} {self.base_url}{path}: {type(exc).__name__}: {exc}") from exc

    def _call(self, method: str, path: str, model: type[M], **kwargs: Any) -> M:
        return self._parse(self._send(method, path, **kwargs), model)

    @staticmethod
    def _parse(response: httpx.Response, model: type[M]) -> M:
        if response.status_code >= 400:
            raise ApiError.of(response)
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                return model.model_validate_json(response.content)
            return TypeAdapter(model).validate_json(response.content)
        except ValidationError as exc:
            raise ApiError(response.status_code, "bad_response", f"not the documented body: {exc}") from exc


def _seg(value: str) -> str:
    """An id as one path segment (an id with ``/`` or ``?`` must not change the route)."""
    return quote(value, safe="")


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: not sent by the worker
