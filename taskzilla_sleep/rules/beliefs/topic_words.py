"""Topics: the words a statement is about, one spelling per thing."""

from __future__ import annotations

import re
from functools import lru_cache

from taskzilla_sleep.rules.beliefs.reading import clean


def _stem(w: str) -> str:
    """One form for a word's inflections ("force", "forces", "forced" → "forc"), for matching only."""
    if "-" in w:
        return w
    for suffix in ("ies", "ing", "ed", "es", "s", "e"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not (suffix == "s" and w.endswith(("ss", "us", "is"))):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return w


# Words that never name what a statement is about: function words, chat fillers, the verbs and
# adjectives of any rule ("need", "always", "new"), time words (slots carry the values).
_NOT_A_TOPIC_WORDS = """
    a about above after again against all almost also although always am among an and another any anybody
    anyone anything anyway anyways are aren't around as ask asked at away back bad be because been before being
    below best better between big both but by can can't cannot come comes could couldn't day days did didn't do does
    doesn't doing don't done down during each easy either else even ever every everybody everyone everything
    few first for from get gets getting give go goes going gone good got great had has hasn't have haven't having he
    her here hers him his how however i i'd i'll i'm i've if in instead into is isn't it it's its itself just keep
    know last later least less let let's like little long look lot lots made make makes many may maybe me might
    mine more most much must my need needed needs never new next nice no nobody none nor not nothing now of off
    ok okay old on once one only or other others our ours out over own please pls plz put quick quite rather
    re really right same say says see seems set should shouldn't since small so some somebody someone something
    still stuff such sure take takes team than thank thanks that that's the their theirs them then there these
    they thing things think this those though through thx till time times to today tomorrow too try two three
    under until up upon us use used using usual usually very via want wants was wasn't way we we'd we'll we're
    we've well were weren't what when whenever where whether which while who whole whom whose why will with
    within without won't work works would wouldn't yeah yes yesterday yet you you'd you'll you're you've your
    yours also guys folks all hey hi hello fyi psa btw reminder note anyone everyone week weeks month months
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    morning afternoon evening night tonight minute minutes hour hours am pm eod asap etc via per
    dont cant wont isnt arent doesnt didnt wasnt shouldnt couldnt wouldnt im ive youre thats lets theres
    post posted posting write wrote written send sent add added check checked link share tell told read include
    mention ping wait reply answer
"""
_NOT_A_TOPIC = frozenset(_NOT_A_TOPIC_WORDS.split())
_NOT_A_TOPIC_STEMS = frozenset(_stem(w) for w in _NOT_A_TOPIC) | _NOT_A_TOPIC
# One spelling per thing, so that "PR" and "pull request" meet (and "prod" and "production").
_ABBREVIATIONS = {
    "pr": "pull-request",
    "prs": "pull-request",
    "pull request": "pull-request",
    "pull requests": "pull-request",
    "mr": "merge-request",
    "mrs": "merge-request",
    "merge request": "merge-request",
    "prod": "production",
    "stg": "staging",
    "env": "environment",
    "envs": "environment",
    "k8s": "kubernetes",
    "db": "database",
    "dbs": "database",
    "repo": "repository",
    "repos": "repository",
    "post-mortem": "postmortem",
    "post mortem": "postmortem",
    "postmortems": "postmortem",
    "deployment": "deploy",
    "deployments": "deploy",
    "deploying": "deploy",
    "deploys": "deploy",
    "deployed": "deploy",
    "config": "configuration",
    "cfg": "configuration",
    "docs": "documentation",
    "doc": "documentation",
    "oncall": "on-call",
    "on call": "on-call",
    "rc": "release-candidate",
}
_SHORT_TOPICS = frozenset({"qa", "ci", "ui", "ux", "os", "vm", "ip", "hr", "ml", "ai"})
_AN_ID = re.compile(r"-\d|\d{3,}")
_PHRASES = re.compile(r"\b(pull requests?|merge requests?|post mortems?|on call)\b")
_TOPIC_WORD = re.compile(r"(?<!\w)[^\W\d_][\w'-]*[^\W_]|(?<!\w)[^\W\d_]", re.UNICODE)  # "6pm" is no "pm"


@lru_cache(maxsize=16384)
def topics(text: str) -> frozenset[str]:
    """The words a statement is about ("refund", "pull-request", "timesheet"): what is left when the
    words of any rule, any chat and any time are removed, and ids; one spelling per thing
    (abbreviations spelled out, inflections stemmed: "forces", "forced" → "forc"). Cheap and offline:
    grouping uses the ones that are rare in a team's window to bring paraphrases together that an
    embedding keeps apart, and polarity (``Slots.denied``/``affirmed``) is read on them."""
    low = _PHRASES.sub(lambda m: _ABBREVIATIONS.get(m.group(1), m.group(1)).replace(" ", "-"), clean(text).casefold())
    out: set[str] = set()
    for w in _TOPIC_WORD.findall(low):
        w = w.strip("'-")
        if len(w) < 3 and w not in _ABBREVIATIONS and w not in _SHORT_TOPICS:
            continue
        w = _ABBREVIATIONS.get(w, w)
        if w in _NOT_A_TOPIC or "'" in w or _AN_ID.search(w):
            continue  # "CHG-2291", "cache-03": one thing's id, not what a rule is about
        stem = _stem(w)
        if stem not in _NOT_A_TOPIC_STEMS:
            out.add(stem)
    return frozenset(out)
