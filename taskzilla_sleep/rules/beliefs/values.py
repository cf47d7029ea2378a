"""Slots: the values a statement commits to — an amount, a count, a duration, a time of day, a
weekday or date, a named thing or person — and its polarity. Two statements about one topic that
disagree on one are a conflict, never support: a changed number barely moves an embedding, so
similarity is never identity."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from taskzilla_sleep.rules.beliefs.polarity import NOT_A_NEGATION, denied_and_affirmed, is_negated, strip_replaced
from taskzilla_sleep.rules.beliefs.reading import INLINE_CODE, URL

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "both": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100,
    "half an": 0.5, "a couple of": 2, "a couple": 2, "couple of": 2,
}  # fmt: skip
# A number: digits (may run into their unit, "2h"), or a whole number word ("one", never the "one" of
# "anyone" or "ones").
_NUM = (
    r"(?<![\w.])(\d+(?:[.,]\d+)?|(?:"
    + "|".join(sorted((re.escape(k) for k in _NUMBER_WORDS), key=len, reverse=True))
    + r")(?![\w-]))"
)
_CURRENCY = {"€": "eur", "eur": "eur", "euro": "eur", "euros": "eur", "$": "usd", "usd": "usd", "dollar": "usd",
             "dollars": "usd", "£": "gbp", "gbp": "gbp", "pounds": "gbp", "chf": "chf", "%": "%", "percent": "%",
             "k": "k", "gb": "gb", "mb": "mb", "tb": "tb", "kb": "kb", "ms": "ms"}  # fmt: skip
_DURATION = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60, "minute": 60,
             "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "d": 86400,
             "day": 86400, "days": 86400, "wk": 604800, "week": 604800, "weeks": 604800, "month": 2592000,
             "months": 2592000, "sprint": None, "sprints": None}  # fmt: skip
_WEEKDAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2, "thursday": 3, "thu": 3,
    "thur": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5, "sat": 5, "sunday": 6, "sun": 6,
}  # fmt: skip
_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4, "may": 5,
    "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9,
    "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}  # fmt: skip
_DATE = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]{3,9})\b|\b([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b"
)
# A day of the month without a month: "the 15th", "on the 3rd", "25th of every month" ("the 5th time",
# "3rd party" are not dates).
_MONTH_DAY = re.compile(
    r"\b(?:the|on)\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+(?:time|times|floor|party|place|attempt|try|round|person|"
    r"gen|generation|edition|grade|percentile|commit|line|step|item|version|release))|"
    r"\b(\d{1,2})(?:st|nd|rd|th)\s+(?:of\s+(?:the|every|each)|every|each)\s+month\b"
)
# 9:30, 14h30, 9am, 9.30pm, 14 uhr — "4.12" is a version and "2h" a duration, not times of day.
_TIME = re.compile(
    r"(?<![\d.])\b(\d{1,2})(?:(?::|h(?=\d{2}))(\d{2})(?![.\d])|\.(\d{2})(?=\s*(?:am|pm|a\.m\.|p\.m\.)))?"
    r"\s*(am|pm|a\.m\.|p\.m\.|uhr\b)?",
    re.I,
)
_NAMED_CAP = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z0-9]+(?:[A-Z][a-z0-9]+)*|[a-z]+[A-Z][A-Za-z0-9]*)\b")
_STOP_CAPS = {"I", "I'm", "I've", "I'll", "OK", "Ok", "PR", "PRs", "CI", "QA", "EOD", "ETA", "FYI", "PSA", "TL", "DR",
              "AM", "PM", "UTC", "CET", "CEST", "EU", "US", "UK"}  # fmt: skip


_SHOUTED = {
    "not", "no", "never", "always", "all", "every", "only", "must", "dont", "please", "pls", "now", "asap", "stop",
    "important", "note", "do", "is", "are", "the", "and", "or", "before", "after", "new", "old", "yes", "both", "any",
}  # fmt: skip


@dataclass(frozen=True)
class Slots:
    """The values a statement commits to, by kind. Empty sets: the statement names none of that kind."""

    negated: bool = False
    amount: frozenset[tuple[str, float]] = frozenset()
    count: frozenset[tuple[str, float]] = frozenset()  # (what is counted, singular), value
    duration: frozenset[float] = frozenset()
    time: frozenset[int] = frozenset()  # minutes after midnight
    weekday: frozenset[int] = frozenset()
    date: frozenset[tuple[int, int]] = frozenset()  # (month, day)
    named: frozenset[str] = field(default_factory=frozenset)
    # Polarity by topic: what the statement says is not done / not so ("no overnight jobs") and what it
    # names without a negation ("overnight jobs are fine"), as beliefs.topics words.
    denied: frozenset[str] = frozenset()
    affirmed: frozenset[str] = frozenset()
    persons: frozenset[str] = frozenset()  # the team members it names (to whom, by whom)

    def values(self) -> dict[str, frozenset[object]]:
        return {
            "amount": frozenset(self.amount),
            "count": frozenset(self.count),
            "duration": frozenset(self.duration),
            "time": frozenset(self.time),
            "weekday": frozenset(self.weekday),
            "date": frozenset(self.date),
            "named": frozenset(self.named),
        }


def _num(raw: str) -> float | None:
    r = raw.casefold().replace(",", ".")
    if r in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[r])
    try:
        return float(r)
    except ValueError:
        return None


_NOT_COUNTED = {
    "am", "pm", "st", "nd", "rd", "th", "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with",
    "without", "and", "or", "but", "is", "are", "was", "were", "be", "it", "its", "this", "that", "these", "those",
    "if", "so", "as", "than", "then", "more", "less", "x", "times", "time", "other", "others", "left",
    "ago", "out", "up", "off", "per", "we", "i", "you", "they", "he", "she", "thing", "things", "way", "ways",
}  # fmt: skip


def _countable(word: str) -> bool:
    return word not in _NOT_COUNTED and word not in _WEEKDAYS and word not in _MONTHS and len(word) > 1


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def slots(text: str, names: Iterable[str] = (), people: Collection[str] = (), speaker: str | None = None) -> Slots:
    """The slots ``text`` commits to. ``names``: known named things (people, tools, projects, tags);
    ``people``: the team's authors (casefolded), so that the person a statement names is a slot of its
    own; ``speaker``: who wrote it, the person of "send them to me"."""
    sl = _slots(text, frozenset(names))
    if not people and speaker is None:
        return sl
    persons = {n for n in sl.named if n in people}
    if speaker and _TO_ME.search(text) and not _NOT_TO_ME.search(text):
        persons.add(speaker.casefold())
    return replace(sl, persons=frozenset(persons)) if persons else sl


# "send me the escalations", "assign them to me": the writer is the person named.
_TO_ME = re.compile(
    r"\b(send|ping|ask|assign|cc|tag|escalate|forward|route|give|bring)\b[^.;!?]{0,30}?\b(to )?me\b", re.I
)
_NOT_TO_ME = re.compile(r"\b(not|never|don't|dont|do not)\s+(\w+\s+){0,2}(to\s+)?me\b", re.I)


# Grouping, distill's support filter and match, absorption and reflect read the same texts' slots.
@lru_cache(maxsize=16384)
def _slots(text: str, names: frozenset[str]) -> Slots:
    raw = INLINE_CODE.sub(" ", URL.sub(" ", text))
    negated = is_negated(strip_replaced(raw))
    t = strip_replaced(raw)
    low = t.casefold()
    amount: set[tuple[str, float]] = set()
    count: set[tuple[str, float]] = set()
    duration: set[float] = set()
    time: set[int] = set()
    used: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in used)

    for m in re.finditer(r"([€$£])\s?(\d+(?:[.,]\d+)?)(k)?|(\d+(?:[.,]\d+)?)\s?(k)?\s?(€|\$|£|eur|euros?|usd|dollars?|"
                         r"gbp|pounds|chf|%|percent|gb|mb|tb|kb|ms)(?![a-z])", low):  # fmt: skip
        unit = _CURRENCY[(m.group(1) or m.group(6) or "").strip()]
        value = _num(m.group(2) or m.group(4) or "")
        if value is not None:
            amount.add((unit, value * (1000 if (m.group(3) or m.group(5)) else 1)))
            used.append(m.span())
    for m in _TIME.finditer(low):
        if not free(*m.span()):
            continue
        h, mins, ampm = int(m.group(1)), m.group(2) or m.group(3), (m.group(4) or "").replace(".", "")
        if mins is None and not ampm:
            continue  # a bare number is not a time
        if ampm == "pm" and h < 12:
            h += 12
        if ampm == "am" and h == 12:
            h = 0
        if h < 24 and int(mins or 0) < 60:
            time.add(h * 60 + int(mins or 0))
            used.append(m.span())
    for word, minutes in (("noon", 720), ("midday", 720), ("midnight", 0)):
        if re.search(rf"\b{word}\b", low):
            time.add(minutes)
    for m in re.finditer(_NUM + r"[\s-]*([a-z]+)", low):
        if not free(*m.span()) or low[max(0, m.start() - 1) : m.start()] in ("#", "v", "."):
            continue
        value, unit = _num(m.group(1)), m.group(2)
        if value is None:
            continue
        if unit in _DURATION:
            seconds = _DURATION[unit]
            duration.add(value * seconds if seconds is not None else value * 1e9)  # sprints: their own unit
            used.append(m.span())
        elif value.is_integer() and "." not in m.group(1) and _countable(unit):
            # A count is of something: "2 approvals" and "two approvals" agree, "9 tickets" says
            # nothing about approvals. Versions ("5.3"), ids and bare numbers are no counts.
            count.add((_singular(unit), value))
            used.append(m.span())
    weekday = {v for w, v in _WEEKDAYS.items() if re.search(rf"\b{w}s?\b", low)}
    date: set[tuple[int, int]] = set()
    for m in _DATE.finditer(low):
        day, month = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        if month in _MONTHS and 1 <= int(day) <= 31:
            date.add((_MONTHS[month], int(day)))
    for m in re.finditer(r"\b(\d{4})-(\d{2})-(\d{2})\b", low):
        date.add((int(m.group(2)), int(m.group(3))))
    for m in _MONTH_DAY.finditer(low):
        day = int(m.group(1) or m.group(2))
        if 1 <= day <= 31 and not any(d == day for _, d in date):
            date.add((0, day))  # a day of every month: "on the 15th", "the 25th of the month"
    named = {n.casefold() for n in names if n and re.search(rf"(?<![\w-])[@#]?{re.escape(n)}(?![\w-])", t, re.I)}
    for m in _NAMED_CAP.finditer(t):
        tok = m.group(1)
        if tok.isupper() and not any(c.isdigit() for c in tok) and len(tok) <= 6 and tok.casefold() in _SHOUTED:
            continue  # "do NOT force it", "ALWAYS": emphasis, not a name
        if tok not in _STOP_CAPS and tok.casefold() not in _WEEKDAYS and tok.casefold() not in _MONTHS:
            named.add(tok.casefold())
    # "no longer" names the old value of a slot, but it denies what follows it: polarity reads the text
    # with only the phrases that are no negation removed.
    denied, affirmed = denied_and_affirmed(NOT_A_NEGATION.sub(" ", raw))
    return Slots(
        negated,
        frozenset(amount),
        frozenset(count),
        frozenset(duration),
        frozenset(time),
        frozenset(weekday),
        frozenset(date),
        frozenset(named),
        denied,
        affirmed - denied,
    )


def union(a: Slots, b: Slots) -> Slots:
    """What a group of statements has committed to so far (polarity: the first one's)."""
    return Slots(
        a.negated,
        a.amount | b.amount,
        a.count | b.count,
        a.duration | b.duration,
        a.time | b.time,
        a.weekday | b.weekday,
        a.date | b.date,
        a.named | b.named,
        (a.denied | b.denied) - (a.affirmed | b.affirmed),
        (a.affirmed | b.affirmed) - (a.denied | b.denied),
        a.persons | b.persons,
    )


_WRITTEN_NUMBER = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)?)")


def mentioned_numbers(text: str) -> frozenset[float]:
    """Every number ``text`` writes out, whatever it counts: "370 words, under the 400" mentions the
    limit as well as the instance; "always the 5th" mentions a day of the month."""
    out = {_num(m.group(1)) for m in _WRITTEN_NUMBER.finditer(text)}
    return frozenset(v for v in out if v is not None)


def _same_date(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Same day of the month; a month of 0 ("the 1st") is any month."""
    return a[1] == b[1] and (a[0] == b[0] or 0 in (a[0], b[0]))


def value_conflict(a: Slots, b: Slots, mentioned: frozenset[float] = frozenset()) -> str | None:
    """The value a message ``a`` disagrees with statement ``b`` on — an amount or a count of one thing,
    another person, or durations, times of day, weekdays or dates with none in common — or None. The
    guard a cited message passes whatever the judge: narrower than :func:`conflict` (no polarity, no
    named tool, no "each names a day the other does not"), which a statement written out in full
    ("nothing ships on Fridays; Friday work waits for Monday") would fail against every message that
    names another day in passing. ``mentioned``: the numbers the message writes anywhere
    (:func:`mentioned_numbers`); an amount, count or day of the month of the statement among them is
    no conflict ("the assault brief is 370 words, under the 400" states the 400-word limit)."""
    for kind, xs, ys in (("amount", a.amount, b.amount), ("count", a.count, b.count)):
        for key in {k for k, _ in xs} & {k for k, _ in ys}:
            theirs = {v for k, v in ys if k == key}
            if not {v for k, v in xs if k == key} & theirs and not theirs & mentioned:
                return kind
    if a.persons and b.persons and not a.persons & b.persons:
        return "named"
    if (
        a.date
        and b.date
        and not any(_same_date(x, y) for x in a.date for y in b.date)
        and not {float(d) for _, d in b.date} & mentioned
    ):
        return "date"
    va, vb = a.values(), b.values()
    for kind in ("duration", "time", "weekday"):
        if va[kind] and vb[kind] and not va[kind] & vb[kind]:
            return kind
    return None


def conflict(a: Slots, b: Slots, strong: bool = True) -> str | None:
    """Which slot two statements about one topic disagree on, or None.

    A value slot disagrees when both statements name values of that kind and share none of them.
    Named things and polarity are weaker signals (a paraphrase may name another tool in passing, or
    say "keep Fridays deploy-free" for "never deploy on Fridays"): they count only when the caller
    knows the two statements are very close otherwise (``strong``)."""
    for kind, xs, ys in (("amount", a.amount, b.amount), ("count", a.count, b.count)):
        # Keyed values (a currency, what is counted): they disagree when both name one key and
        # share no value of it — "300 euros" against "40 %" is no disagreement.
        for key in {k for k, _ in xs} & {k for k, _ in ys}:
            if not {v for k, v in xs if k == key} & {v for k, v in ys if k == key}:
                return kind
    if a.persons and b.persons and not a.persons & b.persons:
        return "named"  # "billing escalations to Marek" / "… to Lucia": another person, whatever else they share
    va, vb = a.values(), b.values()
    for kind in ("duration", "time", "weekday", "date"):
        if va[kind] and vb[kind] and not va[kind] & vb[kind]:
            return kind
    for kind in ("time", "weekday", "date"):
        # Several days or times each, and each names one the other does not: "store day is Tuesday, cut
        # the rc on Friday" against "rc on Tuesday, submit Thursday" share a Tuesday, not the schedule.
        if len(va[kind]) > 1 and len(vb[kind]) > 1 and not (va[kind] <= vb[kind] or vb[kind] <= va[kind]):
            return kind
    if strong and va["named"] and vb["named"] and not va["named"] & vb["named"]:
        return "named"
    if strong and a.negated != b.negated:
        return "polarity"
    if len(a.denied & b.affirmed) >= 2 or len(a.affirmed & b.denied) >= 2:
        # One says "no overnight jobs on the shared nodes", the other "overnight jobs on the shared nodes
        # are fine". One word is not enough: "changes go through terraform" and "don't change resources
        # by hand" state one rule.
        return "polarity"
    return None
