"""The model behind the bench's OpenAI-compatible stub: deterministic, cheap, no oracle.

It plays a sober LLM that follows the two prompts (``taskzilla_sleep/llm/prompts/``) without
knowing the gold labels:

- DISTILL (v3: a topic may hold several beliefs): the messages that *state a rule* (a normative,
  imperative or change cue — always, never, please, must, every, keep, post, we merge, is due, from
  now on, instead of, no more, … — at least five words, not a question) are told apart by meaning
  (the worker's own MiniLM embedder: a message joins the first belief whose first message it is
  within 0.6 cosine of, a message with a change cue never with one without: the later value of a
  change is a belief of its own); each belief with at least the asked minimum of messages is answered, its
  statement the first such message, kind ``norm``, evidence ``explicit_rule``. Chatter, acks and
  work updates ("deploying X to staging") state no rule: no belief.
- REFLECT, each candidate: cosine similarity of the two statements (the worker's own MiniLM
  embedder, so the model "understands" paraphrases) plus change cues: a change statement vs a
  plain one that is similar (≥ 0.5) supersedes it (the worker decides update or disagreement from
  dates and people); ≥ 0.85 same; ≥ 0.7 refines; ≥ 0.55 compatible; else unrelated.

The quality figures therefore measure the worker (grouping, ledger, guards, merge and
contradiction plumbing) with a plausible model, not a real LLM's judgement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ops.bench import prompt_data
from taskzilla_sleep.rules.policies import is_change_statement

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
        if prompt_data.is_distill(body):
            return _distill(body, embed)
        return _reflect(body, embed)

    return answer


# Two messages state one belief when their texts are this close (MiniLM cosine).
SAME_BELIEF = 0.6


def _distill(body: dict[str, Any], embed: Embed) -> str:
    out: dict[int, list[dict[str, Any]]] = {}
    for g in prompt_data.groups(body):
        support = [m for m in g.messages if states_a_rule(str(m["text"]))]
        vecs = [np.asarray(v, dtype=np.float64) for v in embed([str(m["text"]) for m in support])] if support else []
        vecs = [v / max(1e-9, float(np.linalg.norm(v))) for v in vecs]
        # A change ("from now on …") is the later of two values: never the same belief as the earlier.
        beliefs: list[tuple[np.ndarray[Any, Any], bool, list[dict[str, Any]]]] = []
        for m, v in zip(support, vecs, strict=True):
            change = is_change_statement(str(m["text"]))
            home = next((b for b in beliefs if b[1] == change and float(b[0] @ v) >= SAME_BELIEF), None)
            if home is None:
                beliefs.append((v, change, [m]))
            else:
                home[2].append(m)
        out[g.number] = [
            {"statement": str(ms[0]["text"]).strip()[:250], "support": [m["n"] for m in ms]}
            for _, _, ms in beliefs
            if len({m["n"] for m in ms}) >= g.min_support
        ]
    return prompt_data.distill_answer(out)


def _reflect(body: dict[str, Any], embed: Embed) -> str:
    new, olds = prompt_data.beliefs(body)
    texts = [str(new.get("statement", ""))] + [str(o.get("statement", "")) for o in olds]
    vecs = [np.asarray(v, dtype=np.float64) for v in embed(texts)]
    relations = []
    for old, b in zip(texts[1:], vecs[1:], strict=True):
        a = vecs[0]
        sim = float(a @ b / max(1e-9, float(np.linalg.norm(a) * np.linalg.norm(b))))
        if is_change_statement(old) != is_change_statement(texts[0]) and sim >= 0.5:
            relations.append("supersedes")
        elif sim >= 0.85:
            relations.append("same")
        elif sim >= 0.7:
            relations.append("refines")
        elif sim >= 0.55:
            relations.append("compatible")
        else:
            relations.append("unrelated")
    return prompt_data.reflect_answer(relations)
