"""A careless model for the hard-case harness, served over HTTP by the OpenAI-compatible stub.

It does not try to judge: it measures whether the product's own guards protect it from a model
that says yes to everything. Its rule is its own (neither the offline provider's nor
``ops/bench/model.py``'s):

- DISTILL: every group becomes one belief whose statement is the group's longest message (cut to
  the 300 characters an answer may hold), kind ``fact``, evidence ``explicit_rule``, every message
  sent as support;
- REFLECT: ``same`` when the two statements are textually identical, else ``compatible``.
"""

from __future__ import annotations

from typing import Any

from ops.bench import prompt_data

MAX_STATEMENT = 300


def answer(body: dict[str, Any]) -> str:
    """The stub's responder: a request body in, the assistant's content out."""
    if prompt_data.is_distill(body):
        return distill(body)
    return reflect(body)


def distill(body: dict[str, Any]) -> str:
    out: dict[int, list[dict[str, Any]]] = {}
    for g in prompt_data.groups(body):
        if not g.messages:
            out[g.number] = []
            continue
        longest = max(g.messages, key=lambda m: len(str(m["text"])))
        out[g.number] = [
            {
                "statement": str(longest["text"])[:MAX_STATEMENT],
                "kind": "fact",
                "support": [m["n"] for m in g.messages],
            }
        ]
    return prompt_data.distill_answer(out)


def reflect(body: dict[str, Any]) -> str:
    new, olds = prompt_data.beliefs(body)
    return prompt_data.reflect_answer(
        ["same" if o.get("statement") == new.get("statement") else "compatible" for o in olds], "lazy model"
    )
