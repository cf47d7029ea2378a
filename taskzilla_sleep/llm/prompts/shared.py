"""What both prompts share: the Prompt (id, structured-output schema, parsing of the answer's outer
shape, the corrective retry), the encoding of data lines, and the wording of validation problems."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

ChatMessage = dict[str, str]

_MAX_REASONS = 3  # validation problems quoted back to the model; more would only cost tokens


# "<" escaped: no text can close the data block or open a tag of its own; the line and paragraph
# separators escaped: no text can start a data line of its own for a reader that splits on them.
DATA_ESCAPES = str.maketrans({"<": "\\u003c", "\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def data_json(row: Mapping[str, Any]) -> str:
    """One line of a data block: the row as JSON with the escapes above."""
    return json.dumps(row, ensure_ascii=False).translate(DATA_ESCAPES)


class InvalidAnswer(ValueError):
    """The model's answer can't be used; ``reason`` is what the corrective retry tells it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Items(BaseModel):
    """The outer shape both prompts answer: a list of items, each validated on its own afterwards."""

    model_config = ConfigDict(frozen=True)

    items: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Prompt:
    name: Literal["distill", "reflect"]
    version: str
    system: str
    key: str  # the answer's list: {"groups": [...]} or {"verdicts": [...]}
    schema: Mapping[str, Any]

    @property
    def id(self) -> str:
        """``distill-v3``: what a stored result records as the prompt that produced it."""
        return f"{self.name}-{self.version}"

    def response_format(self, json_schema: bool = True, items: int | None = None) -> dict[str, Any] | None:
        """litellm's ``response_format`` for structured output, or None when the server lacks it.

        ``items``: exactly that many entries in the answer's list (one per group or candidate
        asked): under constrained decoding a small model otherwise invents entries until it is cut
        off. A fresh copy each time: litellm adapts schemas in place for some providers.
        """
        if not json_schema:
            return None
        schema = copy.deepcopy(dict(self.schema))
        if items is not None:
            schema["properties"][self.key] |= {"minItems": items, "maxItems": items}
        name = self.id.replace("-", "_")  # OpenAI allows [a-zA-Z0-9_-]; underscores read as one word
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    def parse(self, content: str | None, truncated: bool = False) -> Items:
        """The answer's items (each still to be validated); raises :class:`InvalidAnswer`."""
        if content is None or not content.strip():
            raise InvalidAnswer("the answer was empty; reply with the JSON object only")
        try:
            data = json.loads(_json_text(content))
        except json.JSONDecodeError as exc:
            if truncated:
                raise InvalidAnswer("the answer was cut off before the JSON ended; reply with shorter JSON") from exc
            raise InvalidAnswer(f"the answer is not valid JSON ({exc.msg}, char {exc.pos})") from exc
        items = data.get(self.key) if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InvalidAnswer(f'the answer must be a JSON object {{"{self.key}": [objects]}}')
        return Items(items=tuple(items))

    def correction(self, reason: str) -> ChatMessage:
        """The user message of the corrective retry (sent after the model's own answer)."""
        return {"role": "user", "content": f"Rejected: {reason}. Reply with corrected JSON only."}


def _json_text(content: str) -> str:
    """The JSON object inside an answer: models like to wrap it in ``` fences or a sentence, or to
    add a sentence after it."""
    text = content.strip()
    start = text.find("{")
    if start < 0:
        return text
    try:
        _, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        last = text.rfind("}")
        return text[start : last + 1] if start < last else text[start:]
    return text[start:end]


def describe(exc: ValidationError) -> str:
    """The first few problems of an invalid item, worded for the corrective retry."""
    problems = []
    for error in exc.errors()[:_MAX_REASONS]:
        where = ".".join(str(part) for part in error["loc"]) or "answer"
        shown = error.get("input")
        got = f" (got {shown!r})" if isinstance(shown, int | float | bool) else ""
        problems.append(f"{where}: {error['msg']}{got}")
    more = exc.error_count() - _MAX_REASONS
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
