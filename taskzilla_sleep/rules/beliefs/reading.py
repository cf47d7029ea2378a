"""Reading a message: its sentences and words without URLs or emoji, and the URL and inline-code
patterns the slots skip as well."""

from __future__ import annotations

import re

URL = re.compile(r"https?://\S+|www\.\S+", re.I)
INLINE_CODE = re.compile(r"`[^`]*`")
# Either, in one left-to-right pass (a link inside a code span goes with the span).
LINK_OR_CODE = re.compile(f"{URL.pattern}|{INLINE_CODE.pattern}", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORDS = re.compile(r"[a-z0-9][a-z0-9'’+-]*", re.I)
_EMOJI = re.compile(r"[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]+|:[a-z0-9_+-]+:")


def clean(text: str) -> str:
    """The text without URLs and emoji, with straight apostrophes and single spaces: what every rule reads."""
    t = URL.sub(" ", text)
    t = _EMOJI.sub(" ", t)
    return " ".join(t.replace("’", "'").split())


def sentences(text: str) -> list[str]:
    """The sentences (or lines) of a message, without URLs and emoji."""
    return [s.strip(" -*•>") for s in _SENTENCE_END.split(clean(text)) if s.strip(" -*•>")]


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORDS.findall(text)]
