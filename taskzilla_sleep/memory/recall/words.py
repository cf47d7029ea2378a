"""The words a question shares with each belief's statement: recall's second signal beside the embedder.

The bundled embedder reads English; in a team that writes German or Dutch it ranks beliefs on a
topic close together, often the wrong one first ("mag ik een klant zeggen dat hij een terugbetaling
krijgt?" nearer to the ticket-tag rule than to the refund rule). The words a question and a
statement have in common say which: "terugbetaling" is in one statement of the team, "krijgt" in
several. Nothing here knows a language: a word is a run of letters or digits of at least
``MIN_LEN`` (shorter ones are mostly grammar in every alphabet language), two words are the same
when one begins the other or they share a long beginning ("prod" / "productie", "braucht" /
"brauche", "changes" / "change"), and a word weighs by how rare it is among the statements
compared (inverse document frequency), so "the", "een" and "wird" count for little wherever they
are common. A language without spaces between words (Chinese, Japanese) gets no signal and ranks
by the embedder alone, as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

_WORD = re.compile(r"\w+")
MIN_LEN = 4  # letters in a word that counts
SAME_PREFIX = 0.75  # two words are the same when they share this share of the shorter one's letters


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if len(w) >= MIN_LEN and not w.isdigit())


def same_word(a: str, b: str) -> bool:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n >= MIN_LEN and n >= SAME_PREFIX * min(len(a), len(b))


def shared(question: str, statements: Mapping[str, str]) -> dict[str, float]:
    """For each statement (by id), the share of the question's words it holds, each word weighed by
    its rarity among ``statements`` (0: none, 1: all). Empty when the question has no word."""
    asked = words(question)
    held = {i: words(s) for i, s in statements.items()}
    if not asked or not held:
        return {}
    holders = {w: {i for i, ws in held.items() if any(same_word(w, x) for x in ws)} for w in asked}
    weight = {w: math.log((len(held) + 1) / (len(h) + 1)) + 1.0 for w, h in holders.items()}
    total = sum(weight.values())
    return {i: round(sum(weight[w] for w in asked if i in holders[w]) / total, 4) for i in held}
