"""A careless model for the hard-case harness, served over HTTP by the OpenAI-compatible stub.

It does not try to judge: it measures whether the product's own guards protect it from a model
that says yes to everything. Its rule is its own (neither the offline provider's nor
``ops/bench/model.py``'s):

- DISTILL: every group becomes a pattern whose statement is the group's longest message (cut to
  the 300 characters an answer may hold), kind ``fact``, confidence 0.95, every id sent as support;
- REFLECT: ``same`` when the two statements are textually identical, else ``compatible``.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_STATEMENT = 300
_HEADER = "Messages (id | time | channel | author | text):"
_BELIEF = re.compile(r"^(OLD|NEW) \(.*?\): (.*)$", re.M)


def _user(body: dict[str, Any]) -> str:
    users = [str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user"]
    return users[0] if users else ""


def answer(body: dict[str, Any]) -> str:
    """The stub's responder: a request body in, the assistant's content out."""
    text = _user(body)
    if _HEADER in text:
        return distill(text)
    return reflect(text)


def distill(text: str) -> str:
    rows: list[tuple[str, str]] = []
    for line in text.split(_HEADER, 1)[1].splitlines():
        parts = [p.strip() for p in line.split(" | ", 4)]
        if len(parts) == 5 and parts[0]:
            rows.append((parts[0], parts[4]))
    if not rows:
        return json.dumps({"pattern": None})
    longest = max(rows, key=lambda r: len(r[1]))[1]
    return json.dumps(
        {
            "pattern": {
                "statement": longest[:MAX_STATEMENT],
                "kind": "fact",
                "subjects": [],
                "confidence": 0.95,
                "supporting_ids": [i for i, _ in rows],
            }
        }
    )


def reflect(text: str) -> str:
    found = {m.group(1): m.group(2).strip() for m in _BELIEF.finditer(text)}
    same = found.get("OLD") is not None and found.get("OLD") == found.get("NEW")
    return json.dumps({"relation": "same" if same else "compatible", "reason": "lazy model"})
