"""The two prompts, each kept with its response model, JSON schema and version.

``DISTILL`` (v1) turns a group of related chat episodes into at most one reusable team belief;
``REFLECT`` (v1) says how a new belief relates to an old one. A prompt is data: the client sends
``*_messages(req)`` (plus ``prompt.response_format()`` when the server supports structured output),
then ``prompt.parse(content)`` turns the answer into the response model or says exactly what is
wrong with it — that reason goes back to the model in the one corrective retry.

Prompts are short on purpose: every nightly group and every reflected pair pays for them.
Changing a prompt's wording or schema means a new version string, so stored results can say
which prompt produced them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from taskzilla_sleep.llm.base import DistillRequest, PatternDraft, PatternView, ReflectRequest, Relation, Verdict
from taskzilla_sleep.models import PatternKind

ChatMessage = dict[str, str]
AnswerT = TypeVar("AnswerT", bound=BaseModel)

# An episode's text beyond this is cut: the gist of a chat message is in its first lines, and a
# pasted log must not multiply the tokens of a whole group.
MAX_EPISODE_CHARS = 400
# Under constrained decoding a small model can repeat a list item until max_tokens; a belief
# about more subjects than this is too broad to be useful anyway.
MAX_SUBJECTS = 8
_MAX_REASONS = 3  # validation problems quoted back to the model; more would only cost tokens


class InvalidAnswer(ValueError):
    """The model's answer can't be used; ``reason`` is what the corrective retry tells it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DistillAnswer(BaseModel):
    """DISTILL's response: ``{"pattern": null}`` or ``{"pattern": {...}}`` — the key is required."""

    model_config = ConfigDict(frozen=True)

    pattern: PatternDraft | None


@dataclass(frozen=True)
class Prompt(Generic[AnswerT]):
    name: Literal["distill", "reflect"]
    version: str
    system: str
    response_model: type[AnswerT]
    schema: Mapping[str, Any]

    @property
    def id(self) -> str:
        """``distill-v1``: what a stored result records as the prompt that produced it."""
        return f"{self.name}-{self.version}"

    def response_format(self, json_schema: bool = True) -> dict[str, Any] | None:
        """litellm's ``response_format`` for structured output, or None when the server lacks it.

        A fresh copy each time: litellm adapts schemas in place for some providers.
        """
        if not json_schema:
            return None
        schema = copy.deepcopy(dict(self.schema))
        name = self.id.replace("-", "_")  # OpenAI allows [a-zA-Z0-9_-]; underscores read as one word
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    def parse(self, content: str | None, truncated: bool = False) -> AnswerT:
        """The answer as the response model; raises :class:`InvalidAnswer` saying what is wrong."""
        if content is None or not content.strip():
            raise InvalidAnswer("the answer was empty; reply with the JSON object only")
        try:
            data = json.loads(_json_text(content))
        except json.JSONDecodeError as exc:
            if truncated:
                raise InvalidAnswer("the answer was cut off before the JSON ended; reply with shorter JSON") from exc
            raise InvalidAnswer(f"the answer is not valid JSON ({exc.msg}, char {exc.pos})") from exc
        try:
            return self.response_model.model_validate(data)
        except ValidationError as exc:
            raise InvalidAnswer(_describe(exc)) from exc

    def correction(self, reason: str) -> ChatMessage:
        """The user message of the corrective retry (sent after the model's own answer)."""
        return {"role": "user", "content": f"Rejected: {reason}. Reply with corrected JSON only."}


# -- DISTILL v1 ---------------------------------------------------------------------------------

_KINDS = [k.value for k in PatternKind]

DISTILL = Prompt(
    name="distill",
    version="v1",
    system=(
        "You distill a team's chat messages into at most one reusable belief worth remembering, "
        'e.g. "Martin prefers small PRs; keep changes scoped".\n'
        "kind: preference (what someone wants), process (how the team does something), "
        "norm (a rule to follow), fact (a stable truth).\n"
        "Learn only from messages that state the belief, never from noise (greetings, thanks, +1, "
        '"looks good", small talk). If not enough messages support one belief, answer {"pattern": null}.\n'
        'Answer JSON only: {"pattern": null} or {"pattern": {"statement": "<=300 chars", '
        '"kind": "preference|process|norm|fact", "subjects": [names from Entities], '
        '"confidence": 0.0-1.0, "supporting_ids": [ids of supporting messages]}}'
    ),
    response_model=DistillAnswer,
    # The strict subset OpenAI accepts: every key required, no extra keys, no string lengths
    # (the 300-char limit is checked on parse). Static, so providers can cache its grammar.
    schema={
        "type": "object",
        "properties": {
            "pattern": {
                "anyOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "properties": {
                            "statement": {"type": "string"},
                            "kind": {"type": "string", "enum": _KINDS},
                            "subjects": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_SUBJECTS},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                            "supporting_ids": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["statement", "kind", "subjects", "confidence", "supporting_ids"],
                        "additionalProperties": False,
                    },
                ]
            }
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)


def distill_messages(req: DistillRequest) -> list[ChatMessage]:
    lines = [
        f"Entities: {', '.join(req.known_entities) or '(none)'}",
        "Messages (id | time | channel | author | text):",
        *(
            f"{e.id} | {e.ts:%Y-%m-%d %H:%M} | {e.channel} | {e.author} | {_one_line(e.text, MAX_EPISODE_CHARS)}"
            for e in req.episodes
        ),
        f"A belief needs at least {req.min_support} supporting messages.",
    ]
    return [{"role": "system", "content": DISTILL.system}, {"role": "user", "content": "\n".join(lines)}]


def distill_max_tokens(req: DistillRequest) -> int:
    # Room for a 300-char statement, the JSON around it and one id per episode; a model that
    # rambles past this is cut off (and told so) instead of billing us for an essay.
    return min(1024, 200 + 16 * len(req.episodes))


# -- REFLECT v1 ---------------------------------------------------------------------------------

_RELATIONS: list[str] = list(get_args(Relation))

REFLECT = Prompt(
    name="reflect",
    version="v1",
    system=(
        "Compare a NEW team belief with an OLD one. relation: same (same meaning), refines (NEW adds "
        "detail to OLD), compatible (related, both can hold), contradicts (both cannot be true or "
        "followed at once), unrelated.\n"
        'Answer JSON only: {"relation": "same|refines|compatible|contradicts|unrelated", '
        '"reason": "one short sentence"}'
    ),
    response_model=Verdict,
    schema={
        "type": "object",
        "properties": {
            "relation": {"type": "string", "enum": _RELATIONS},
            "reason": {"type": "string"},
        },
        "required": ["relation", "reason"],
        "additionalProperties": False,
    },
)

REFLECT_MAX_TOKENS = 120


def reflect_messages(req: ReflectRequest) -> list[ChatMessage]:
    def belief(label: str, p: PatternView) -> str:
        return f"{label} ({p.kind}, {p.support} messages, since {p.first_seen:%Y-%m-%d}): {_one_line(p.statement, 400)}"

    user = f"{belief('OLD', req.old)}\n{belief('NEW', req.new)}"
    return [{"role": "system", "content": REFLECT.system}, {"role": "user", "content": user}]


# -- helpers ------------------------------------------------------------------------------------


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())  # one message a line: the model must not mistake a newline for a new message
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _json_text(content: str) -> str:
    """The JSON object inside an answer: models like to wrap it in ``` fences or a sentence."""
    text = content.strip()
    if text.startswith("{"):
        return text
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:_MAX_REASONS]:
        where = ".".join(str(part) for part in error["loc"]) or "answer"
        shown = error.get("input")
        got = f" (got {shown!r})" if isinstance(shown, int | float | bool) else ""
        problems.append(f"{where}: {error['msg']}{got}")
    more = exc.error_count() - _MAX_REASONS
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
