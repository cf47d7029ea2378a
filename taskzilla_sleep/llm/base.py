"""What the steps ask of a language model, and what they accept back.

Every answer is validated against the request before the steps see it (supporting ids must be a
subset of the group sent, confidence within [0, 1], statement non-empty and at most 300
characters, subjects among the entities sent). A provider returns ``()`` when the model declines
("no belief in this group") and :class:`Unanswered` when no usable answer came back (it failed validation,
also after the corrective retry). The two are not the same: a decline is a decision, an unusable
answer is a failure — the question is asked again at the next distill, like after a 5xx.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from taskzilla_sleep.core.models import Evidence, PatternKind
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.rules.beliefs import injection

# ``supersedes``: the team changed its practice and NEW replaces OLD from NEW's first date;
# ``contradicts``: both are meant to hold now and people disagree.
Relation = Literal["same", "refines", "compatible", "supersedes", "contradicts", "unrelated"]
CONFLICTS: frozenset[str] = frozenset({"supersedes", "contradicts"})
MAX_STATEMENT_CHARS = 300


class EpisodeView(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    author: str
    channel: str
    ts: datetime
    text: str
    provenance: str = "human"
    entities: tuple[str, ...] = ()  # names it mentions (projects, tools, tags, people): not shown to a model
    reply_to: str | None = None  # the id of the message it answers (shown by number when in the same group)
    # The message it answers when that is not in the group ("author: text"), so the model reads the reply
    # with its question; None when it is in the group, or not stored.
    answered: str | None = None


class DistillRequest(BaseModel):
    """One group of related raw episodes; the model may propose up to MAX_BELIEFS beliefs, each
    supported by its own messages of the group."""

    model_config = ConfigDict(frozen=True)

    team: str
    group_key: str
    episodes: tuple[EpisodeView, ...]
    known_entities: tuple[str, ...]  # entity names the pattern's subjects must come from
    min_support: int = 3
    reference_time: datetime | None = None  # "now" for the model: what "since" and "yesterday" mean
    people: tuple[str, ...] = ()  # the window's authors, casefolded: "@sara" is a person, not a tool


class PatternDraft(BaseModel):
    """A validated proposal (the steps turn it into a Pattern with a ledger-based confidence).

    ``confidence`` is the provider's input to the ledger: for a model, the number code maps its
    ``evidence`` category to (``EVIDENCE_CONFIDENCE``), never a number the model rated itself.
    ``replaces``/``since``: the group holds a change, and this belief is the new practice.
    """

    model_config = ConfigDict(frozen=True)

    statement: str = Field(min_length=1, max_length=MAX_STATEMENT_CHARS)
    kind: PatternKind
    subjects: tuple[str, ...] = ()
    confidence: float = Field(ge=0.0, le=1.0)
    supporting_ids: tuple[str, ...]
    evidence: Evidence | None = None
    replaces: str | None = None
    since: datetime | None = None


# The rubric's categories as numbers: a model's self-rated confidence says ≥ 0.85 for almost
# anything, a category is a judgement it can be asked to justify. With the ledger's own weight
# (policies.ledger_confidence), three messages from two people reach the 0.80 floor only as an
# explicit rule; a single opinion never does.
EVIDENCE_CONFIDENCE: Mapping[Evidence, float] = {
    Evidence.EXPLICIT_RULE: 0.9,
    Evidence.REPEATED_PRACTICE: 0.8,
    Evidence.MIXED: 0.5,
    Evidence.SINGLE_OPINION: 0.3,
}
MAX_BELIEFS = 12  # per topic (a small team's whole window): its beliefs, changes' two values, camps


class PatternView(BaseModel):
    """A belief as reflect shows it: when and by whom it was stated, with two of its messages."""

    model_config = ConfigDict(frozen=True)

    id: str
    statement: str
    kind: PatternKind
    first_seen: datetime
    support: int
    last_seen: datetime | None = None
    authors: tuple[tuple[str, int], ...] = ()  # (author, supporting messages), most first
    subjects: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()  # up to two supporting messages written by people
    replaces: str | None = None  # the distiller saw it replace this earlier practice


class ReflectRequest(BaseModel):
    """Is ``new`` the same belief as ``old``, a refinement, compatible, a contradiction, or unrelated?"""

    model_config = ConfigDict(frozen=True)

    team: str
    new: PatternView
    old: PatternView
    similarity: float


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    relation: Relation
    reason: str = ""


MAX_REASON_CHARS = 300
REASON_WITHHELD = "(the model's reason was withheld: it read as an instruction)"


def shown_reason(text: str) -> str:
    """A model's reason as people see it (a contradiction's alert, the console): one line of at most
    ``MAX_REASON_CHARS``, withheld when it reads as an order or holds a secret (the injection lint).
    The litellm client cleans a verdict's reason as it reads the answer; reflect again, whatever the
    provider."""
    reason = one_line(text, MAX_REASON_CHARS)
    return reason if injection(reason) is None else REASON_WITHHELD


@dataclass(frozen=True)
class Unanswered:
    """No usable answer to one request: what was wrong with the last reply (for logs and the ledger)."""

    reason: str


class LLMUsage:
    """Per-run counters; thread-safe because calls run concurrently.

    A provider's usage is the process's (the worker's concurrent team jobs share one client); what one
    job asked is counted, besides, in the scopes it opened (:func:`usage_scope`): a context variable,
    so the client's pool threads (run in a copy of the caller's context) count into the caller's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd: float | None = 0.0  # None once any call's cost is unknown (unmapped model)
        self.invalid_answers = 0
        self.retries = 0
        self.skipped = 0

    def add_call(self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        for u in (self, *_SCOPES.get()):
            u._add_call(prompt_tokens, completion_tokens, cost_usd)

    def _add_call(self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            if cost_usd is None or self.cost_usd is None:
                self.cost_usd = None
            else:
                self.cost_usd += cost_usd

    def add(self, field: Literal["invalid_answers", "retries", "skipped"], n: int = 1) -> None:
        for u in (self, *_SCOPES.get()):
            with u._lock:
                setattr(u, field, getattr(u, field) + n)

    def as_dict(self) -> dict[str, int | float | None]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "invalid_answers": self.invalid_answers,
            "retries": self.retries,
            "skipped": self.skipped,
        }


_SCOPES: ContextVar[tuple[LLMUsage, ...]] = ContextVar("taskzilla_llm_usage_scopes", default=())


@contextmanager
def usage_scope() -> Iterator[LLMUsage]:
    """What the calls made inside the block (in this context and the threads it hands it to) used,
    whatever other threads ask of the same provider meanwhile."""
    mine = LLMUsage()
    token = _SCOPES.set((*_SCOPES.get(), mine))
    try:
        yield mine
    finally:
        _SCOPES.reset(token)


class LLMProvider(Protocol):
    name: str
    usage: LLMUsage
    # The languages it judges (ISO 639-1); None: any. The offline provider's rules read English only:
    # distill counts what it is shown in another language, per team (beliefs/language.py).
    languages: frozenset[str] | None
    # What stored results record as the source of their judgement: {"distill": ..., "reflect": ...}.
    prompt_ids: Mapping[str, str]

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        """One answer per request, in order: the group's beliefs (at most MAX_BELIEFS; ``()`` = the
        model declined, there is no belief in the group), or Unanswered."""
        ...

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        """One verdict per request, in order."""
        ...


def validate_draft(req: DistillRequest, draft: PatternDraft) -> str | None:
    """Why ``draft`` is not acceptable for ``req``, or None when it is."""
    sent = {e.id for e in req.episodes}
    unknown = [i for i in draft.supporting_ids if i not in sent]
    if unknown:
        return f"supporting_ids not in the group sent: {unknown[:5]}"
    if len(set(draft.supporting_ids)) < req.min_support:
        return f"needs at least {req.min_support} distinct supporting episodes, got {len(set(draft.supporting_ids))}"
    if not draft.statement.strip():
        return "statement is blank"
    known = {k.casefold() for k in req.known_entities}
    strangers = [s for s in draft.subjects if s.casefold() not in known]
    if strangers:
        return f"subjects are not entities of the group: {strangers[:5]}"
    return None
