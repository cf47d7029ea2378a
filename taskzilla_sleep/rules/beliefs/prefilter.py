"""What is never shown to any judge (a model or the offline rules): certain, language-neutral filters.

With a model, the model judges and the rules guard: nothing before it may depend on a language, or
a team that does not write English learns nothing whatever model it pays for. What is left out here
is left out for every provider, because it can never state a team's belief, in any language:

- the bot's own drafts (``ai-draft``): the model-collapse guard;
- what a bot posts (``bot``): a scheduled reminder repeats a rule, it never states one, and never keeps
  an old value alive after people changed it;
- chatter: fewer than ``MIN_WORDS`` words that hold a letter ("ok", "thx!!", "+1", "👍", "morning all";
  in a script written without spaces, two characters count as a word);
- a message made only of questions: every sentence ends with a question mark, in any script;
- an injection marker: an order to the assistant, a role marker, a secret (the flag kept on the
  message at ingest, ``lint.flagged``; the lint itself only for one without a current flag).

Everything else goes to the judge, which decides what is a belief.
"""

from __future__ import annotations

import re
from enum import StrEnum

from taskzilla_sleep.core.models import Episode, EpisodeStatus, Provenance
from taskzilla_sleep.rules.beliefs.lint import flagged
from taskzilla_sleep.rules.beliefs.reading import LINK_OR_CODE

MIN_WORDS = 3
_LETTER_WORD = re.compile(r"\w*[^\W\d_]\w*", re.UNICODE)  # a word with at least one letter, in any script
# Scripts written without spaces (Han, kana, Hangul, Thai): two characters count as a word.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f]")
# Sentence ends in the scripts chat is written in (Latin, CJK full-width, Arabic, Armenian, Greek ";").
_ENDS = re.compile(r"[.!?。！？؟\u037e…]+|\n+")
_QUESTION = frozenset("?？؟\u037e")


class Withheld(StrEnum):
    """Why a message is not shown to the judge."""

    NOT_RAW = "not_raw"  # absorbed, retired, pinned: not this distill's to judge
    DRAFT = "draft"
    BOT = "bot"
    CHATTER = "chatter"
    QUESTION = "question"
    INJECTION = "injection"


def withheld(ep: Episode) -> Withheld | None:
    """Why ``ep`` is not shown to the judge, or None when it is."""
    if ep.status is not EpisodeStatus.RAW or ep.pinned:
        return Withheld.NOT_RAW
    if ep.provenance is Provenance.AI_DRAFT:
        return Withheld.DRAFT
    if ep.provenance is Provenance.BOT:
        return Withheld.BOT
    plain = LINK_OR_CODE.sub(" ", ep.text)
    if words(plain) < MIN_WORDS:
        return Withheld.CHATTER
    if only_questions(plain):
        return Withheld.QUESTION
    if flagged(ep.text, ep.injection, ep.injection_lint):
        return Withheld.INJECTION
    return None


def words(text: str) -> int:
    """How many words ``text`` has, in any script (a run of an unspaced script: one per two characters)."""
    unspaced = len(_UNSPACED.findall(text))
    spaced = [w for w in _LETTER_WORD.findall(text) if not _UNSPACED.search(w)]
    return len(spaced) + unspaced // 2


def only_questions(text: str) -> bool:
    """Every sentence of ``text`` is a question: it has at least one sentence end, and each one is a
    question mark (the text's own end included: "Who deploys? Me." is not only questions)."""
    body = text.rstrip()
    stripped = re.sub(r"[\W_]+$", lambda m: "".join(c for c in m.group() if c in "?？؟\u037e.!。！…"), body)
    ends = [m.group() for m in _ENDS.finditer(stripped)]
    tail = stripped[-1:] if stripped else ""
    if not ends or tail not in _QUESTION:
        return False
    return all(set(e.strip()) <= _QUESTION for e in ends if e.strip())
