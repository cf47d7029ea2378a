"""Which language a message is written in, and which languages the product's own rules read.

Everything in the product that depends on a language is named here. The rules of ``beliefs`` (the
belief gate, change cues, negation, rare topic words) and the offline provider read English only:

- with a model, they are never a filter in front of it (``prefilter`` is language-neutral); the
  belief gate is one more guard on absorption, only for a message in a language it reads;
- the offline provider judges only messages in a language it reads, and counts the others per team
  ("38 % of team X's messages are not in a language the offline judgement reads");
- the bundled embedder (MiniLM) compares meanings in English only (``BUNDLED_EMBEDDER_READS``): text
  of another language sits close to any other text of it, so its similarity says nothing there.
  Absorbing a message (which decay later retires) needs the gate or the embedder to read its
  language (``reads``); an embedder that declares no languages (litellm, chosen by the operator for
  the team's languages) is taken at its word.

The language comes from py3langid (langid.py's model, from the registry; no download), asked among
the languages chat teams commonly write. A message of fewer than ``MIN_WORDS`` words is too short to
tell (None): a short message is judged as any other (it is mostly chatter, which the prefilter drops).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from taskzilla_sleep.rules.beliefs.reading import LINK_OR_CODE

# What the rules of ``beliefs`` and the offline provider read.
RULES_READ: frozenset[str] = frozenset({"en"})
# What the bundled embedder (all-MiniLM-L6-v2) compares meanings in: its ``languages``.
BUNDLED_EMBEDDER_READS: frozenset[str] = frozenset({"en"})
# The languages a message is told among (ISO 639-1): asking among fewer makes a short message's
# guess better than among all 97 the model knows.
CANDIDATES: tuple[str, ...] = (
    "en", "de", "nl", "fr", "es", "it", "pt", "pl", "sv", "da", "no", "fi", "cs", "ru", "uk", "tr",
    "ja", "zh", "ko", "id", "ro", "hu", "el", "he", "ar", "hi", "vi", "th",
)  # fmt: skip
MIN_WORDS = 4
_WORD = re.compile(r"\w+", re.UNICODE)
_lock = threading.Lock()


@functools.cache
def _identifier() -> Any:
    """The model, read once a process. py3langid's own loader streams the xz-compressed model (4.5 MB)
    into a 68 MB temporary file and reads it back: ~0.4-1 s of disk on every CLI command or worker that
    distills. Decompressed in memory instead (the same arrays; the 68 MB are freed once read)."""
    import io
    import lzma
    from array import array

    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

    def to_array(a: Any) -> array[int]:  # what py3langid's loader makes of its automaton's tables
        out = array({2: "H", 4: "I", 8: "L"}[a.dtype.itemsize])
        out.frombytes(np.ascontiguousarray(a).tobytes())
        return out

    with lzma.open(MODEL_DIR / MODEL_FILE) as src, np.load(io.BytesIO(src.read()), allow_pickle=False) as m:
        ident = LanguageIdentifier(
            np.asarray(m["ptc"]),
            np.asarray(m["pc"]),
            m["classes"].tolist(),
            to_array(m["nextmove"]),
            m["out_feat"].tolist(),
            norm_probs=True,
            tk_row=to_array(m["nextmove_row"]),
        )
    ident.set_languages(list(CANDIDATES))
    return ident


def language_of(text: str) -> str | None:
    """The message's language (ISO 639-1), or None when it is too short to tell."""
    plain = LINK_OR_CODE.sub(" ", text)
    if len(_WORD.findall(plain)) < MIN_WORDS:
        return None
    with _lock:  # one model, not thread-safe while it sets its languages up
        lang, _prob = _identifier().classify(plain)
    return str(lang)


def rules_read(text: str) -> bool:
    """Do the product's own (English) rules read this message? A message too short to tell: yes."""
    return reads(RULES_READ, text)


def reads(languages: frozenset[str] | None, text: str) -> bool:
    """Is ``text`` in one of ``languages`` (None: any language)? A message too short to tell: yes."""
    if languages is None:
        return True
    lang = language_of(text)
    return lang is None or lang in languages
