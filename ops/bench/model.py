"""The model behind the bench's OpenAI-compatible stub: deterministic, cheap, no oracle.

It plays a sober LLM that follows the two prompts (``taskzilla_sleep/llm/prompts.py``) without
knowing the gold labels:

- DISTILL: the messages that *state a rule* (a normative, imperative or change cue — always,
  never, please, must, every, keep, post, we merge, is due, from now on, instead of, no more, … —
  at least five words, not a question) support the belief; with at least the asked minimum of them
  it answers a pattern whose statement is the first such message, kind ``norm``, confidence 0.9;
  otherwise ``{"pattern": null}``.
  Chatter, acks and work updates ("deploying X to staging") state no rule: no pattern.
- REFLECT: cosine similarity of the two statements (the worker's own MiniLM embedder, so the
  model "understands" paraphrases) plus change cues: a change statement vs a plain one that is
  similar (≥ 0.5) contradicts it; ≥ 0.85 same; ≥ 0.7 refines; ≥ 0.55 compatible; else unrelated.

The quality figures therefore measure the worker (grouping, ledger, guards, merge and
contradiction plumbing) with a plausible model, not a real LLM's judgement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from taskzilla_sleep.policies import is_change_statement

_LINE = re.compile(r"^(\S+) \| \d{4}-\d\d-\d\d \d\d:\d\d \| .*? \| .*? \| (.*)$")
_MIN = re.compile(r"at least (\d+) supporting messages")
_BELIEF = re.compile(r"^(OLD|NEW) \([^)]*\): (.*)$", re.M)
_NORMATIVE = re.compile(
    r"\b(always|never|please|should|must|don't|do not|every|each|rule|agreed|agreement|promise|target|"
    r"need|needs|has to|have to|required|only|first|before you|before it|at most|within|nothing|nobody|no \w+|"
    r"from now on|instead of|anymore|no more|no longer|switched|moved to|"
    # imperatives and habitual statements: "keep …", "post … in #releases", "we merge … on Tuesdays"
    r"keep|split|break it up|put|post|write|wrap|share|answer|respond|take|use|stick to|prefix|drop|"
    r"join|hold|park|merge|get|link|hand over|starts with|goes|go in|are due|is due|freeze|"
    r"we (?:want|write|merge|use|do|make|protect|moved)|our \w+ (?:is|target))\b",
    re.IGNORECASE,
)

Embed = Callable[[Sequence[str]], list[list[float]]]


def states_a_rule(text: str) -> bool:
    t = text.strip()
    return len(t.split()) >= 5 and not t.endswith("?") and _NORMATIVE.search(t) is not None


def responder(embed: Embed) -> Callable[[dict[str, Any]], str]:
    """The stub's ``default`` responder (a request body in, the assistant's content out)."""

    def answer(body: dict[str, Any]) -> str:
        users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
        first = str(users[0]) if users else ""
        if "Messages (id | time" in first:
            return _distill(first)
        return _reflect(first, embed)

    return answer


def _distill(text: str) -> str:
    found = m.group(1) if (m := _MIN.search(text)) else "3"
    need = int(found)
    rows = [(m.group(1), m.group(2)) for line in text.splitlines() if (m := _LINE.match(line))]
    support = [(i, t) for i, t in rows if states_a_rule(t)]
    if len({i for i, _ in support}) < need:
        return json.dumps({"pattern": None})
    statement = support[0][1].strip()[:250]
    return json.dumps(
        {
            "pattern": {
                "statement": statement,
                "kind": "norm",
                "subjects": [],
                "confidence": 0.9,
                "supporting_ids": [i for i, _ in support],
            }
        }
    )


def _reflect(text: str, embed: Embed) -> str:
    beliefs = {m.group(1): m.group(2) for m in _BELIEF.finditer(text)}
    old, new = beliefs.get("OLD", ""), beliefs.get("NEW", "")
    a, b = (np.asarray(v, dtype=np.float64) for v in embed([old, new]))
    sim = float(a @ b / max(1e-9, float(np.linalg.norm(a) * np.linalg.norm(b))))
    if is_change_statement(old) != is_change_statement(new) and sim >= 0.5:
        relation = "contradicts"
    elif sim >= 0.85:
        relation = "same"
    elif sim >= 0.7:
        relation = "refines"
    elif sim >= 0.55:
        relation = "compatible"
    else:
        relation = "unrelated"
    return json.dumps({"relation": relation, "reason": f"stub: similarity {sim:.2f}"})
