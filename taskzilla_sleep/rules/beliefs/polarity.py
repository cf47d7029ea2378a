"""Negation and polarity: what a statement says is not done or not so, what it says is done, allowed
or required, and the phrases that name the value it replaces (the old belief's, not its own)."""

from __future__ import annotations

import re

from taskzilla_sleep.rules.beliefs.topic_words import topics

_NEGATION = re.compile(
    r"\b(not|no|never|don't|dont|doesn't|doesnt|isn't|isnt|aren't|arent|can't|cant|cannot|won't|wont|shouldn't|"
    r"mustn't|without|nobody|nothing|none|neither|nor|stop|stopped|avoid|forbidden|prohibited|banned|"
    r"disallowed|off-limits|no longer)\b",
    re.I,
)
# Phrases that name the value a statement replaces ("instead of 9:30", "from 60 to 40", "no longer
# on Tuesdays"): those values are the old belief's, not this one's.
_REPLACED = [
    re.compile(r"\b(instead of|rather than|in place of|replacing|replaces|no longer|no more|not anymore|used to be|"
               r"used to|previously|was|were|moved off|away from|switched from|moving off|dropped|retired)\b"
               r"([^.;!?]{0,40})",
               re.I),
    re.compile(r"\bfrom\b([^.;!?]{1,25}?)\bto\b", re.I),
    re.compile(r"\b(not|no more)\b([^.;!?]{1,25}?)\b(anymore|any more)\b", re.I),
]  # fmt: skip


# Negative words that do not negate what a statement says: "every incident gets a postmortem, no
# exceptions" states the rule with emphasis, "don't forget to post it" is an order to post it.
NOT_A_NEGATION = re.compile(
    r"\b(no exceptions?|no excuses?|no matter\b[^,.;!?]*|not only|not just|(don't|dont|do not|never) forget( to)?|"
    r"(is|are|isn't|aren't)? ?not (enough|sufficient)|isn't enough|aren't enough|"
    r"no doubt|no problem|no worries|(whether|if) or not|or not|if not|not sure)\b",
    re.I,
)


def strip_replaced(text: str) -> str:
    """The text without the values it replaces ("instead of 9:30") and without the negative words that
    negate nothing ("no exceptions"): a statement's own values and polarity are read on what is left."""
    out = NOT_A_NEGATION.sub(" ", text)
    for rx in _REPLACED:
        out = rx.sub(" ", out)
    return out


# A requirement said with a negation is not a reversal: "no migration without a backup" (a double
# negative), "always staging first, never straight to prod" (the rule and the forbidden shortcut).
_DOUBLE_NEGATIVE = re.compile(
    r"\b(no|not|never|nothing|nobody|don't|do not)\b[^.;!?]{0,50}\b(without|unless|until|except|before)\b", re.I
)
_AFFIRMED = re.compile(r"\b(always|every|each|must|first)\b", re.I)


def is_negated(text: str) -> bool:
    """A negative statement as a whole, unless the negation states a requirement or the rule is also
    affirmed (see above)."""
    if _NEGATION.search(text) is None:
        return False
    return not (_DOUBLE_NEGATIVE.search(text) or _AFFIRMED.search(text))


_CLAUSE = re.compile(r"[.;:!?,()\n—–]+|\s-\s|\bbut\b|\bso\b|\bbecause\b|\binstead\b|\bunless\b", re.I)


# A clause that says something is done, allowed or required ("overnight jobs are fine", "every minor
# forces the update"), not merely mentioned ("select * breaks the build").
_PERMITS = re.compile(
    r"\b(allowed|fine|ok|okay|permitted|welcome|must|always|every|each|should|needs? to|have to|has to|required|"
    r"mandatory|as usual|as always|is for|are for|(go|goes) (to|through|in|into))\b",
    re.I,
)


_MANNER = re.compile(
    r"\b(by hand|manual|manually|directly|straight (to|into|in)|(in|from|via) the (console|ui|web ui|portal)|"
    r"by clicking|click(ing)? (in|around))\b",
    re.I,
)


def denied_and_affirmed(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The topic words a negation governs (the rest of its clause, at most five words on: "no overnight
    jobs", "minors don't force updates") and those of clauses that say a thing is done, allowed or
    required. Nothing is denied when the negation states a requirement ("no merge without two
    approvals") or the rule is affirmed as well ("always staging first, never straight to prod")."""
    denies = _DOUBLE_NEGATIVE.search(text) is None and _AFFIRMED.search(text) is None
    denied: set[str] = set()
    affirmed: set[str] = set()
    for clause in _CLAUSE.split(text):
        negations = list(_NEGATION.finditer(clause))
        # "don't change resources by hand": the negation forbids a way of doing it (the rule says the
        # other way, like "always X, never Y"), not the thing.
        if negations and denies and not _MANNER.search(clause):
            for m in negations:
                denied |= topics(" ".join(clause[m.end() :].split()[:5]))
        elif not negations and _PERMITS.search(clause):
            affirmed |= topics(clause)
    return frozenset(denied), frozenset(affirmed)
