"""The MCP tools: recall, remember, list_contradictions, resolve_contradiction, pin_fact, forget.

Each tool is a thin, typed wrapper of one :class:`MemoryService` operation (the same semantics as the
HTTP API): the service checks the caller's role and team and audits every write. The caller is the
stdio server's one :class:`Access` (fixed at start), or, over HTTP, the one :class:`BearerGate`
authenticated for this very request. Every failure comes back as a tool error (``is_error``) whose
text starts with the API's error code (``forbidden: ...``, ``invalid: ...``); invalid arguments are
refused before anything runs, so they write nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from taskzilla_sleep import __version__
from taskzilla_sleep.core.errors import Busy, TaskzillaError
from taskzilla_sleep.core.models import Contradiction, EpisodeIn, Pattern, StorableStr, TeamName
from taskzilla_sleep.interfaces.api import IngestQueue
from taskzilla_sleep.interfaces.api.errors import CODES, status_of
from taskzilla_sleep.interfaces.api.schemas import IngestResult, RecallResult
from taskzilla_sleep.memory.admin import ForgetReport
from taskzilla_sleep.memory.ingest import MAX_REPORTED_ERRORS, field_of, reason_of
from taskzilla_sleep.memory.recall import render_prompt
from taskzilla_sleep.rules.access import Access
from taskzilla_sleep.service.memory_service import ContradictionView, MemoryService

ACCESS_KEY = "taskzilla.access"  # where BearerGate leaves the caller in an HTTP request's ASGI scope
TOOL_NAMES = ("recall", "remember", "list_contradictions", "resolve_contradiction", "pin_fact", "forget")
MAX_EPISODES = 1000

INSTRUCTIONS = (
    "The team's long-term memory, consolidated every night from its chat: beliefs (patterns) with "
    "confidence and evidence, facts pinned by people, and raw messages. Call `recall` before answering "
    "a question about the team's habits, decisions or people; cite what it returns (author, channel, "
    "time). Call `remember` to store messages as they are said. Contradictions between beliefs are "
    "for a person to resolve: list them, and resolve one only when a person has decided. Each call is "
    "limited to the teams and role (read < write < admin) of the token this server was given."
)

Team = Annotated[
    TeamName | None,
    Field(description="The team (letters, digits, '_' or '-'). Omit to use the deployment's default team."),
]
Id = Annotated[StorableStr, Field(min_length=1, max_length=200)]


class Contradictions(BaseModel):
    """The team's contradictions: two beliefs that disagree, each with both statements."""

    team: str
    contradictions: list[ContradictionView]


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """The package's errors as the model reads them: the API's code, then the message (no traceback)."""
    try:
        yield
    except Busy as exc:
        raise ToolError(f"busy: {exc} (retry after {exc.retry_after_s} s)") from exc
    except TaskzillaError as exc:
        code = getattr(exc, "code", None) or CODES.get(status_of(exc), "error")
        raise ToolError(f"{code}: {str(exc)[:2000]}") from exc


def _invalid(exc: ValidationError) -> str:
    """Pydantic's errors as the ingest file reports them: which item, which field, why."""
    lines: list[str] = []
    for err in exc.errors()[:MAX_REPORTED_ERRORS]:
        loc = list(err["loc"])
        if len(loc) >= 2 and loc[0] == "episodes" and isinstance(loc[1], int):
            where = f"episode {loc[1]}" + (f", field '{field_of({'loc': tuple(loc[2:])})}'" if loc[2:] else "")
        else:
            where = f"argument '{field_of({'loc': tuple(loc)})}'" if loc else "arguments"
        lines.append(f"{where}: {reason_of(err)}")
    more = len(exc.errors()) - len(lines)
    return "invalid: " + "; ".join(lines) + (f"; and {more} more" if more > 0 else "") + "; nothing was written"


class TaskzillaMCP(MCPServer[Any]):
    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK's call, its error text starting with the API's code (``not_found: …``), not with the
        SDK's "Error executing tool NAME: " (the model reads the code first, as a client of /v1 does)."""
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK logs it and tells the model nothing of it
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # arguments that fail the tool's schema: one readable line
                raise ToolError(_invalid(cause)) from cause
            if isinstance(cause, ToolError):  # ours, already "code: message"
                raise ToolError(str(cause)) from cause
            raise


F = TypeVar("F", bound=Callable[..., Any])


def _tool(server: MCPServer[Any], annotations: ToolAnnotations) -> Callable[[F], F]:
    """``server.tool`` with the docstring as the description, its source indentation removed."""

    def register(fn: F) -> F:
        return server.tool(annotations=annotations, description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    return register


def build_server(service: MemoryService, access: Access | None) -> MCPServer[Any]:
    """The MCP server on ``service``. ``access``: the stdio caller; None: each HTTP request's own,
    left in its scope by :class:`~taskzilla_sleep.interfaces.mcp_server.http.BearerGate` (none there: refused)."""
    settings = service.settings
    queue = IngestQueue(settings.api.ingest_concurrency, settings.api.ingest_queue)
    server = TaskzillaMCP("taskzilla-sleep", version=__version__, instructions=INSTRUCTIONS)

    def caller(ctx: Context[Any, Any]) -> Access:
        if access is not None:
            return access
        request = ctx.request_context.request
        scope = getattr(request, "scope", None)
        found = scope.get(ACCESS_KEY) if isinstance(scope, dict) else None
        if not isinstance(found, Access):  # an app mounted without the gate: refuse, never guess
            raise ToolError("unauthorized: this request carries no authenticated token")
        return found

    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @_tool(server, reads)
    def recall(
        ctx: Context[Any, Any],
        query: Annotated[StorableStr, Field(min_length=1, max_length=2000, description="The question, in words.")],
        team: Team = None,
        entity: Annotated[
            StorableStr | None, Field(max_length=200, description="Only memories about this person or project.")
        ] = None,
        k: Annotated[int, Field(ge=1, le=50, description="How many items at most.")] = 5,
        include_superseded: Annotated[
            bool, Field(description="Also beliefs a person's resolution replaced (labelled superseded).")
        ] = False,
        include_drafts: Annotated[
            bool, Field(description="Also the bot's own ai-draft messages (labelled draft); never learned from.")
        ] = False,
        format: Annotated[
            Literal["json", "prompt"],
            Field(description="prompt: also a quoted block of the items for a system prompt, within `budget`."),
        ] = "json",
        budget: Annotated[int, Field(ge=20, le=20_000, description="The prompt block's size in tokens.")] = 600,
    ) -> RecallResult:
        """What the team's memory says about a question, best first: facts pinned by people, then beliefs
        (patterns) with their confidence, similarity and evidence count, before raw messages as close.
        Each item names its author, channel, time and provenance: cite them. A contested belief comes
        with the contradiction's id. Never another team's memory; never the bot's own drafts unless asked."""
        with _as_tool_errors():
            who = caller(ctx)
            scope = service.team(who, team)
            items = service.recall(
                who,
                scope,
                query,
                entity=entity,
                k=k,
                include_drafts=include_drafts,
                include_superseded=include_superseded,
            )
        prompt = render_prompt(items, budget) if format == "prompt" else None
        return RecallResult(team=scope, items=items, prompt=prompt)

    @_tool(server, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    async def remember(
        ctx: Context[Any, Any],
        episodes: Annotated[
            list[EpisodeIn],
            Field(
                min_length=1,
                max_length=MAX_EPISODES,
                description="The messages, each with team, channel, author, text, ts (ISO-8601 with a UTC "
                "offset) and provenance (human, bot, ai-draft, import); optional id (the chat's message id).",
            ),
        ],
    ) -> IngestResult:
        """Store chat messages (episodes) in the team's memory, all or nothing: one invalid message and
        nothing is written. A message sent again (same id and content) is counted as present. The nightly
        consolidation distills beliefs from them; `recall` finds them at once."""
        with _as_tool_errors():
            who = caller(ctx)
            report = await queue.run(lambda: service.ingest(who, episodes, source="mcp"))
        return IngestResult(
            new=report.new,
            present=report.present,
            skipped=report.skipped,
            skipped_by_connector=report.skipped_by_connector,
            edited=report.edited,
            edits_ignored=report.edits_ignored,
        )

    @_tool(server, reads)
    def list_contradictions(
        ctx: Context[Any, Any],
        team: Team = None,
        status: Annotated[Literal["open", "resolved"], Field(description="open: waiting for a person.")] = "open",
    ) -> Contradictions:
        """The team's contradictions: pairs of beliefs that disagree (an `update`: the team seems to have
        changed its practice; a `disagreement`: people disagree), with both statements and the id to
        resolve. Ask a person which one holds before calling `resolve_contradiction`."""
        with _as_tool_errors():
            who = caller(ctx)
            scope = service.team(who, team)
            return Contradictions(team=scope, contradictions=service.contradictions(who, scope, status))

    @_tool(server, ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
    def resolve_contradiction(
        ctx: Context[Any, Any],
        id: Annotated[Id, Field(description="The contradiction's id (con_...), from list_contradictions or recall.")],
        keep: Annotated[
            Literal["new", "old", "both"],
            Field(description="new: the new belief holds (the old is superseded); old: the reverse; both: both hold."),
        ],
        note: Annotated[
            StorableStr | None, Field(max_length=2000, description="Why, in the person's words (kept with it).")
        ] = None,
    ) -> Contradiction:
        """Record a person's decision on a contradiction. Call it only when a person has decided; the
        decision is recorded as made by this server's token."""
        with _as_tool_errors():
            return service.resolve(caller(ctx), id, keep, note)

    @_tool(server, ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def pin_fact(
        ctx: Context[Any, Any],
        text: Annotated[StorableStr, Field(min_length=1, max_length=300, description="The fact, one sentence.")],
        team: Team = None,
        entity: Annotated[
            StorableStr | None, Field(max_length=200, description="The person (or thing) it is about.")
        ] = None,
    ) -> Pattern:
        """Pin a fact a person declared (e.g. "Lea is on call this week"): recalled first, with confidence
        1.0, and immune to every nightly step until a person unpins it."""
        with _as_tool_errors():
            return service.pin(caller(ctx), team, text, entity)

    @_tool(server, ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
    def forget(
        ctx: Context[Any, Any],
        reason: Annotated[
            StorableStr, Field(min_length=1, max_length=500, description="Why, e.g. 'left the team and asked'.")
        ],
        team: Team = None,
        episode_id: Annotated[Id | None, Field(description="Forget this one message.")] = None,
        author: Annotated[Id | None, Field(description="Forget every message this person wrote in the team.")] = None,
        pattern_id: Annotated[
            Id | None, Field(description="Forget this belief (its absorbed messages become raw again).")
        ] = None,
    ) -> ForgetReport:
        """Forget on a person's request, from both stores: exactly one of episode_id, author or
        pattern_id. Beliefs that lose evidence are re-scored (retired when none is left). Waits for a
        running nightly consolidation (then answers busy). Recorded with this server's token and the reason."""
        named = [x for x in (episode_id, author, pattern_id) if x is not None]
        if len(named) != 1:
            raise ToolError("invalid: name exactly one of episode_id, author, pattern_id; nothing was forgotten")
        with _as_tool_errors():
            return service.forget(
                caller(ctx), team, reason, episode_id=episode_id, author=author, pattern_id=pattern_id
            )

    return server
