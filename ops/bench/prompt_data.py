"""Read the data out of a v2 request, for the stub models that play an LLM over HTTP.

A real model reads the prompt; these stubs read the same request with a parser instead, so they
see exactly what a model is sent: the groups of a DISTILL batch (messages numbered from 1, as
JSON lines between ``<messages>`` tags) and the NEW belief with its numbered OLD candidates of a
REFLECT call (JSON lines between ``<beliefs>`` tags). The system prompt's worked examples are not
data: only the last user message is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_GROUP = re.compile(r'<group n="(\d+)">\n(.*?)\n</group>', re.S)
_MESSAGES = re.compile(r"<messages>\n(.*?)\n</messages>", re.S)
_NEEDS = re.compile(r"at least (\d+) supporting messages")
_BELIEFS = re.compile(r"<beliefs>\n(.*?)\n</beliefs>", re.S)


@dataclass(frozen=True)
class Group:
    number: int
    min_support: int
    messages: list[dict[str, Any]]  # {"n", "time", "channel", "author", "provenance", "text"}


def user_text(body: dict[str, Any]) -> str:
    users = [str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user"]
    return users[0] if users else ""


def is_distill(body: dict[str, Any]) -> bool:
    return "<group n=" in user_text(body)


def groups(body: dict[str, Any]) -> list[Group]:
    out = []
    for m in _GROUP.finditer(user_text(body)):
        block = m.group(2)
        rows = _MESSAGES.search(block)
        needs = _NEEDS.search(block)
        messages = [json.loads(line) for line in rows.group(1).splitlines()] if rows else []
        out.append(Group(int(m.group(1)), int(needs.group(1)) if needs else 3, messages))
    return out


def beliefs(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the NEW belief, the OLD candidates in number order)."""
    m = _BELIEFS.search(user_text(body))
    if m is None:
        return {}, []
    new: dict[str, Any] = {}
    olds: list[dict[str, Any]] = []
    for line in m.group(1).splitlines():
        label, _, data = line.partition(" ")
        if label == "NEW":
            new = json.loads(data)
        else:
            olds.append(json.loads(data))
    return new, olds


def distill_answer(per_group: dict[int, list[dict[str, Any]]]) -> str:
    """``{"groups": [...]}`` from {group number: beliefs}, filling the keys a stub leaves out."""
    full: dict[str, Any] = {
        "reason": "stub",
        "kind": "norm",
        "evidence": "explicit_rule",
        "subjects": [],
        "replaces": None,
        "since": None,
    }
    return json.dumps(
        {"groups": [{"group": g, "beliefs": [full | b for b in bs]} for g, bs in sorted(per_group.items())]}
    )


def reflect_answer(relations: list[str], reason: str = "stub") -> str:
    verdicts = [{"candidate": n, "reason": reason, "relation": r} for n, r in enumerate(relations, 1)]
    return json.dumps({"verdicts": verdicts})
