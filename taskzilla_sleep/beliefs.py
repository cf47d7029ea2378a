"""What a message states, decided from its text alone: pure, no I/O, the same for every provider.

- **The belief gate** (:func:`statement_kind`): only a statement of a reusable belief — a norm,
  process, preference or stable fact of the team — may support or be absorbed into a pattern.
  Questions, replies addressed to one person, first-person anecdotes and status updates, one-off
  logistics and chatter never do, however many people wrote them. Precision first: absorbing is
  destructive, so what is unclear is left out.
- **The injection lint** (:func:`injection`): chat is data, never instructions. A statement that
  reads as an order to the assistant, carries a role marker, or asks for (or holds) secrets never
  becomes a belief, whoever and however many said it.
- **Slots** (:func:`slots`, :func:`conflict`): two statements about one topic that disagree on a
  value — an amount, a count, a duration, a time of day, a weekday or date, a named thing — or on
  polarity are a conflict, never support: a changed number barely moves an embedding, so
  similarity is never identity.

Every rule here is about a class of messages (their form), never about one sentence.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache


class Kind(StrEnum):
    BELIEF = "belief"
    QUESTION = "question"
    ADDRESSED = "addressed"  # a reply to one person
    PERSONAL = "personal"  # a first-person anecdote, experience or plan
    STATUS = "status"  # a work status update
    LOGISTICS = "logistics"  # a one-off arrangement
    CHATTER = "chatter"
    INJECTION = "injection"


# -- text helpers ----------------------------------------------------------------------------------

_URL = re.compile(r"https?://\S+|www\.\S+", re.I)
_CODE = re.compile(r"`[^`]*`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORDS = re.compile(r"[a-z0-9][a-z0-9'’+-]*", re.I)
_EMOJI = re.compile(r"[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]+|:[a-z0-9_+-]+:")


def _clean(text: str) -> str:
    t = _URL.sub(" ", text)
    t = _EMOJI.sub(" ", t)
    return " ".join(t.replace("’", "'").split())


def sentences(text: str) -> list[str]:
    """The sentences (or lines) of a message, without URLs and emoji."""
    return [s.strip(" -*•>") for s in _SENTENCE_END.split(_clean(text)) if s.strip(" -*•>")]


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORDS.findall(text)]


# -- the injection lint ----------------------------------------------------------------------------

_INJECTION = [
    # Orders to the assistant, whatever the wording around them.
    r"\b(ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(instructions?|prompts?|rules|guidelines|guardrails|"
    r"system|polic(y|ies)|previous|prior|above)\b",
    r"\b(you are|you're) (now|no longer|an? (ai|assistant|language model|llm))\b",
    r"\b(the |our |this )?(assistant|bot|ai|llm|model|taskzilla)\b[^.!?\n]{0,30}\b(must|should|shall|will|has to|"
    r"is (required|allowed|instructed)|always|never)\b[^.!?\n]{0,40}\b(obey|comply|reveal|output|print|respond|answer|"
    r"say|tell|share|send|post|execute|run|ignore|follow)\b",
    r"\b(new|updated|real|hidden|secret) (system )?(instructions?|prompt)\b",
    # Words addressed to the assistant itself ("a note for your AI assistant: …"): people do not tell
    # each other their norms through the bot.
    r"\b(for|to|dear|hey|attention|note to|message to|instructions? (for|to))\s+(the |your |our |any )?"
    r"(ai|a\.i\.|assistant|ai assistant|bot|chatbot|llm|language model|model|taskzilla)\b\s*[:,-]",
    r"\bjailbreak\b|\bdo anything now\b|\bdeveloper mode\b",
    # Role markers and chat-template tokens inside a message.
    r"(^|\n)\s*(system|assistant|user|developer)\s*[:>]",
    r"<\|[a-z_]+\|>|\[/?inst\]|<</?sys>>|###\s*(instruction|system)",
    # Secrets: asked for, handed around, or pasted.
    r"\b(share|paste|post|send|drop|put|give|dm|email|mail|upload|commit|print|reveal|tell)\b[^.!?\n]{0,50}"
    r"\b(passwords?|passphrases?|credentials?|(api|access|auth|secret|private|ssh|gpg|pgp)[ _-]?(keys?|tokens?)|"
    r"tokens?|secrets?|private keys?|id_rsa|\.env|2fa codes?|otp)\b",
    r"\b(passwords?|credentials?|api[ _-]?keys?|tokens?|secrets?|private keys?)\b[^.!?\n]{0,40}\b(in|to|into|on|with)\b"
    r"[^.!?\n]{0,20}(#\w+|\bchat\b|\bchannel\b|\bslack\b|\bpublic\b|\beveryone\b|\bthe team\b)",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\b(sk-[A-Za-z0-9]{16,}|ghp_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b",
    r"\b(password|passwd|pwd|token|api[_-]?key|secret)\s*[:=]\s*\S{6,}",
]
_INJECTION_RE = [re.compile(p, re.I) for p in _INJECTION]
# The two "handing secrets around" patterns: "never share passwords in chat" is a rule against it.
_NEGATABLE = {rx for rx in _INJECTION_RE if rx.pattern.startswith((r"\b(share|paste", r"\b(passwords?|credentials?"))}


# "Never share passwords in chat" is a rule against it: a negation just before the verb clears a match.
_NEGATED_BEFORE = re.compile(r"\b(never|don't|dont|do not|doesn't|no one|nobody|not|no)\W+(\w+\W+){0,3}$", re.I)


# ... or a rule that names where secrets must not go ("share credentials through the vault, never in a channel").
_NEGATED_DESTINATION = re.compile(
    r"\b(never|not|no|don't|do not)\s+(\w+\s+){0,2}?(in|on|into|to|via|through|over)\s+(a |the |any |our )?"
    r"(#\w+|chat|channels?|slack|public|dms?|e-?mails?|messages?|tickets?|here|the repo|git)\b",
    re.I,
)


_UNSAFE_DESTINATION = re.compile(
    r"\b(in|on|into|to|via|over)\s+(a |the |any |our )?(#\w+|chat|channels?|slack|public|dms?|e-?mails?|messages?|"
    r"tickets?|here|everyone)\b",
    re.I,
)


def _only_negated_destination(text: str, m: re.Match[str]) -> bool:
    """The secrets are sent only somewhere safe: every chat destination named is negated ("through
    the vault, never in a channel"); "post tokens in #general, not in email" names one that is not."""
    window = text[m.start() : m.end() + 40]
    neg = _NEGATED_DESTINATION.search(window)
    return neg is not None and _UNSAFE_DESTINATION.search(window[: neg.start()]) is None


def injection(text: str) -> str | None:
    """The part of ``text`` that reads as an order to the assistant or handles secrets, or None."""
    for rx in _INJECTION_RE:
        for m in rx.finditer(text):
            if rx in _NEGATABLE and (
                _NEGATED_BEFORE.search(text[max(0, m.start() - 30) : m.start()]) or _only_negated_destination(text, m)
            ):
                continue  # "never share passwords in chat", "keys go in the vault, not in Slack"
            return m.group(0).strip()
    return None


# -- the belief gate -------------------------------------------------------------------------------

# Who a first-person message speaks for when it states a rule: the team, not the writer alone.
_COLLECTIVE_WORDS = (
    r"we|we're|we've|we'll|our|us|everyone|everybody|every ?one|nobody|no one|anyone who|all of us|the team|team|"
    r"rule|rules|policy|convention|norm"
)
_COLLECTIVE = re.compile(rf"\b({_COLLECTIVE_WORDS})\b", re.I)
# A team marker: the statement is about the team or is a rule, not about the writer alone.
_TEAM = re.compile(
    rf"\b({_COLLECTIVE_WORDS}|"
    r"always|never|must|mustn't|should|shouldn't|shall|need to|needs to|have to|has to|required?|mandatory|"
    r"allowed|not allowed|forbidden|please|pls|plz|don't|do not|dont|"
    r"every|each|whenever|by default|default|only|nothing|everything|"
    r"no \w+( \w+){0,2} (on|in|after|before|without|until|during|over|outside|unless))\b",
    re.I,
)
# A prohibition at the start of a clause: "It's Friday, so no production rollouts" — a rule, unless it
# is about one occasion ("no push this morning").
_PROHIBITION = re.compile(
    r"(^|[:;,.!]\s*|\bso\s+)(no|never) (?!idea|worries|problem|clue|way|thanks|luck|rush|stress)\w+", re.I
)
# An instruction to the team, at the start of a sentence or clause ("Standup is async: post your update
# …"): the imperative is a rule's usual form.
_IMPERATIVE = re.compile(
    r"(^|[:;—–,]\s*|\bplease\s+|\bthen\s+)(keep|use|run|post|park|drop|hand|ship|write|put|ask|add|tag|ping|open|merge|squash|rebase|deploy|check|"
    r"update|book|file|send|review|test|wait|make|follow|avoid|include|link|mention|label|assign|close|document|"
    r"record|announce|notify|respond|submit|get|let (?!'s|’s)|let's (always|never|not|keep|use|make sure|stick|agree)|"
    r"go|be|split|start|finish|attach|cc|loop in|escalate|double-check|"
    r"confirm|note|remember|try to|aim for|stick to|prefer|skip|never|always|don't|do not|restart|reboot|paste|"
    r"unlock|fill in|clear|back up|raise|copy|reply to|answer|reserve|clean up|escalate|upload|archive|delete|"
    r"revert|roll back|verify)\b|"
    # Verbs that are nouns as often ("switch build went from …", "lock screen"): only opening a sentence.
    r"^(take|give|bring|show|pick|turn|lock|read|set|move|call|log|save|pin|bump|cut|request|leave|hold|stop|switch|"
    r"reply|sign|schedule|"
    r"block|route|page|pair|demo|present|store|measure|label|screenshot|flag)\s+(the|a|an|it|them|this|that|your|"
    r"all|every|each|any|off|on|up|out|in|down|back|before|after|first)\b",
    re.I,
)
# Habitual or lasting: the opposite of a one-off arrangement.
_HABITUAL = re.compile(
    r"\b(always|never|every|each|whenever|usually|normally|generally|by default|from now on|going forward|"
    r"from (today|tomorrow|monday|tuesday|wednesday|thursday|friday|next|this) on|starting|as of|anymore|"
    r"(from|since|starting|beginning) (today|tomorrow|now|monday|tuesday|wednesday|thursday|friday|"
    r"(this|next) (week|month|sprint|release|quarter))|"
    r"no longer|rule|policy|as usual|the usual|(each|every|a|per) (day|week|month|sprint|release)|"
    r"(of|every) (the|each) month)\b|\b(mon|tues|wednes|thurs|fri|satur|sun)days\b|\bweekly|daily|nightly|monthly\b",
    re.I,
)
# A general statement's usual words, when it has no team marker: what is needed or required, a
# threshold ("above 60 eur", "up to 40"), an equation of a rule ("no ticket = no change"), "as usual",
# a reminder, or a present state ("that's the day now", "it is 40 now").
_GENERIC = re.compile(
    r"\b(needs?|needed|requires?|required|usual|usually|reminder|remember|at least|at most|up to|no later than|"
    r"maximum|minimum|only if|(?<![\d\s])(?<!\d\s)(max|min)\b|^(max|min)\b|unless|"
    r"(go|goes) (to|through|into|in|here|before|after|first)|"
    r"(above|below|over|under|more than|less than|within|in the first) (\d|[$€£]|(a|an|one|two|three|four|five|six|"
    r"seven|eight|nine|ten|twelve|fifteen|twenty|thirty|forty|fifty|sixty|ninety|hundred)\b))|\s=\s|"
    r"\bgets? \w+ed\b|\b(the )?same day\b|\b(is|are|'s)\b[^.!?]{0,40}\bnow\b|\bnow\b[^.!?]{0,20}\b(is|are)\b|"
    r"\b(is|are|happens|starts|runs|closes|opens)\s+"
    r"(at \d|(on )?(mon|tues|wednes|thurs|fri|satur|sun)days?\b|every|each|due|daily|weekly)|"
    # A standing date or deadline: "the deadline is Friday 4pm", "patching day is the 15th", "Friday is frozen".
    r"\b(deadline|due (by|on|at))\b|\b(is|are|'s) (the )?\d{1,2}(st|nd|rd|th)\b|"
    r"\b(is|are|'s) (frozen|off[- ]limits|(a )?no[- ]\w+( day)?)\b",
    re.I,
)
_ONE_OFF = re.compile(
    r"\b(today|tonight|tomorrow|yesterday|this (morning|afternoon|evening|week)|right now|later( today)?|"
    r"in (a|an|\d+|few|a few) (min|mins|minutes|hours?|sec|secs|seconds)|asap|soon|eod|"
    r"(lunch|coffee|dinner|drinks|pizza|beer|cake)\b|brb|afk|ooo|out of office|sick today|on leave)\b",
    re.I,
)
_PERSONAL = re.compile(
    r"^(i|i'm|im|i've|ive|i'll|ill|i'd|id|my|me|myself|mine)\b|"
    r"\b(i|i'm|i've)\s+(just|finally|still|already|tried|did|had|was|got|went|made|ran|saw|found|fixed|finished|"
    r"pushed|merged|deployed|broke|spent|think i|guess|wonder|hope|feel|can't|cannot|couldn't|wasn't|am)\b",
    re.I,
)
_STATUS = re.compile(
    r"^(deploying|deployed|merging|merged|running|ran|restarting|restarted|rebuilding|rebuilt|looking into|looking at|"
    r"working on|testing|tested|checking|checked|investigating|rolling back|rolled back|rolling out|pushing|pushed|"
    r"updating|updated|fixing|fixed|finished|done|wip|on it|eta|build|pipeline|job|ci|starting|started|shipping|"
    r"shipped|releasing|released|reviewing|reviewed|upgrading|upgraded|migrating|migrated|cleaning|cleaned|"
    r"copying|copied|closing|closed|opened|filed|created|added|removed|bumped|reverted|acked|ack|paged|resolved)\b|"
    r"\b(is|are) (down|up|back|green|red|broken|flaky|fixed|done|failing|passing|deployed|live|merged|stuck|slow)\b|"
    r"\b(passed|failed|succeeded|completed|finished)\b[^.!?]{0,20}$|#\d+\b|\bbuild \d+|\bv\d+\.\d+",
    re.I,
)
_QUESTION_START = re.compile(
    r"^(how|what|why|where|when|who|whom|whose|which|is there|are there|is it|is this|are we|are you|can i|can we|"
    r"can you|can someone|can anyone|could|would|should i|should we|do i|do we|do you|does|did|anyone|any idea|"
    r"any ideas|has anyone|have you|is anyone|isn't|aren't|wondering|quick question|question)\b",
    re.I,
)
_ANNOUNCES_CHANGE = re.compile(
    r"\b(from now on|going forward|now|starting|as of|instead of|no longer|anymore|switched|moved|changed|replaced|"
    r"updated|is gone|are gone)\b",
    re.I,
)
_GREETING = re.compile(
    r"^\W*((good\s+)?(morning|afternoon|evening|night)|hi|hello|hey|hiya|yo|gm|howdy)\b[\s,]*"
    r"(all|everyone|everybody|team|folks|guys|y'all|people|friends)?\W*$",
    re.I,
)
_RECURRING_THING = re.compile(r"\b(nightly|daily|weekly|monthly)\s+(?!is\b|are\b|at\b|on\b)\w+", re.I)
# "The build should pass now": an expectation about one thing, not a rule.
_EXPECTATION = re.compile(
    r"\b(should|shouldn't|should not)\s+(be\s+)?(pass|passing|work|working|fine|ok|okay|good|back|ready|green|up|"
    r"live|land|arrive|finish|hold|help|happen|come|break|fail)\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(i|i'm|im|i've|i'll|i'd|me|my|mine|myself)\b(?!['’-])", re.I)
_ADVICE = re.compile(
    r"\byou\b[^.!?]{0,20}\b(can|could|might|may|need to|needs to|have to|should|must|will|'ll)\b", re.I
)
_ADDRESS = re.compile(r"^\s*@?([\w|`^\[\]{}\\-][\w.\-|`^\[\]{}\\]{0,30})\s*[:,]\s*\S")  # IRC nicks too: |trey|
_LEAD_MENTION = re.compile(r"^\s*@([\w.\-]+)")
_NOT_A_NAME = {"note", "reminder", "psa", "fyi", "rule", "update", "heads up", "tip", "important", "ps", "nb", "btw"}


def _is_question(s: str) -> bool:
    t = s.rstrip(" )]\"'")
    if t.endswith("?"):
        return True
    # "when you cut a release, tag it": a conditional rule, not a question without its mark.
    return (
        t[-1:] not in ".!"
        and _QUESTION_START.match(t) is not None
        and not _TEAM.search(t)
        and not _PROHIBITION.search(t)
        and not _IMPERATIVE.search(t)
    )


def _general(sentence: str) -> bool:
    """A sentence that states a rule by itself, whoever wrote the rest of the message: no first person,
    and a rule's marker ("Did mine at 16:04. Timesheets are due by 4pm every Friday" states the rule)."""
    return _FIRST_PERSON.search(sentence) is None and (
        _TEAM.search(sentence) is not None
        or _PROHIBITION.search(sentence) is not None
        or _IMPERATIVE.search(sentence) is not None
        or _HABITUAL.search(sentence) is not None
        or _GENERIC.search(sentence) is not None
    )


def statement_kind(text: str, people: Collection[str] = ()) -> Kind:
    """What kind of message ``text`` is. ``people``: the team's authors (casefolded), so that
    ``"maria: try again"`` is known to be a reply to Maria."""
    return _statement_kind(text, frozenset(people))


# One night asks about the same message in grouping, the provider and absorption: decided once.
@lru_cache(maxsize=16384)
def _statement_kind(text: str, people: frozenset[str]) -> Kind:
    if injection(text):
        return Kind.INJECTION
    sents = sentences(text)
    if not sents or len(words(" ".join(sents))) < 2:
        return Kind.CHATTER
    first = sents[0]
    addressed = _ADDRESS.match(first)
    if addressed and addressed.group(1).casefold() not in _NOT_A_NAME:
        name = addressed.group(1).casefold()
        if name in people or first.lstrip().startswith("@"):
            return Kind.ADDRESSED
    mention = _LEAD_MENTION.match(first)
    if mention and not (_TEAM.search(text) or _PROHIBITION.search(text)):
        return Kind.ADDRESSED
    # A message is judged by its sentences that are not questions: "Reminder: two approvals per
    # PR. Questions?" is a rule; "how do I …? I tried X" is not.
    stated = [s for s in sents if not _is_question(s)]
    if not stated:
        return Kind.QUESTION
    # "Morning team!" greets; it says nothing about the team. "The build should pass now" expects.
    stated = [s for s in stated if not _GREETING.match(s)] or stated
    body = _EXPECTATION.sub(" ", " ".join(stated))
    team = _TEAM.search(body) is not None or any(_IMPERATIVE.search(x) for x in stated)
    speaks_for_team = (
        _COLLECTIVE.search(body) is not None
        or _ANNOUNCES_CHANGE.search(body) is not None  # "I changed the macro, now it sends 3 reminders"
        or any(_IMPERATIVE.match(x) for x in stated)
    )
    about_me = _PERSONAL.search(body) is not None or all(_FIRST_PERSON.search(x) for x in stated)
    if about_me and not speaks_for_team and not any(_general(x) for x in stated):
        # "I always use it at work", "if I can get wine to run it I wouldn't need windows": about
        # the writer, however habitual it sounds; "I think we should always pair" speaks for the team.
        return Kind.PERSONAL
    if _ADVICE.search(body) and not speaks_for_team:
        # "if that annoys you, you can do sudo -s": advice to the person who asked, not a rule of the team.
        return Kind.ADDRESSED
    prohibits = _PROHIBITION.search(body) is not None
    # "Nightly build #1482: green" reports one run of a recurring thing: "nightly" is no rule there.
    if _STATUS.search(stated[0]) and not (team or prohibits) and not _HABITUAL.search(_RECURRING_THING.sub(" ", body)):
        return Kind.STATUS
    if (
        _ONE_OFF.search(body)
        and not _HABITUAL.search(body)
        and not team
        # "UI PRs = before & after screenshots. Two of yesterday's had none": the rule is a sentence of its own
        and not any(_general(x) and not _ONE_OFF.search(x) for x in stated)
    ):
        return Kind.LOGISTICS
    team = team or prohibits
    if len(words(body)) < 3 and not team:
        return Kind.CHATTER
    if not team and not _HABITUAL.search(body) and not _GENERIC.search(body):
        # Precision first: a belief says so — a team marker, a rule's imperative or a habitual
        # word. A bare report of what happened ("4.12 rc1 tagged") is a status update.
        return Kind.STATUS
    return Kind.BELIEF


def declarative(text: str) -> str:
    """The statement a message makes: its sentences that are not questions (URLs and emoji dropped);
    "Can we split big PRs? Small PRs get reviewed the same day." states the second sentence."""
    stated = [s for s in sentences(text) if not _is_question(s)]
    return " ".join(stated) if stated else " ".join(text.split())


def is_belief(text: str, people: Collection[str] = ()) -> bool:
    return statement_kind(text, people) is Kind.BELIEF


# -- slots -------------------------------------------------------------------------------------------

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


# Negative words that do not negate what a statement says: "every incident gets a postmortem, no
# exceptions" states the rule with emphasis, "don't forget to post it" is an order to post it.
_NOT_A_NEGATION = re.compile(
    r"\b(no exceptions?|no excuses?|no matter\b[^,.;!?]*|not only|not just|(don't|dont|do not|never) forget( to)?|"
    r"(is|are|isn't|aren't)? ?not (enough|sufficient)|isn't enough|aren't enough|"
    r"no doubt|no problem|no worries|(whether|if) or not|or not|if not|not sure)\b",
    re.I,
)


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


def _strip_replaced(text: str) -> str:
    out = _NOT_A_NEGATION.sub(" ", text)
    for rx in _REPLACED:
        out = rx.sub(" ", out)
    return out


# A requirement said with a negation is not a reversal: "no migration without a backup" (a double
# negative), "always staging first, never straight to prod" (the rule and the forbidden shortcut).
_DOUBLE_NEGATIVE = re.compile(
    r"\b(no|not|never|nothing|nobody|don't|do not)\b[^.;!?]{0,50}\b(without|unless|until|except|before)\b", re.I
)
_AFFIRMED = re.compile(r"\b(always|every|each|must|first)\b", re.I)


def _negated(text: str) -> bool:
    if _NEGATION.search(text) is None:
        return False
    return not (_DOUBLE_NEGATIVE.search(text) or _AFFIRMED.search(text))


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
    raw = _CODE.sub(" ", _URL.sub(" ", text))
    negated = _negated(_strip_replaced(raw))
    t = _strip_replaced(raw)
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
    denied, affirmed = _polarity(_NOT_A_NEGATION.sub(" ", raw))
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


def _polarity(text: str) -> tuple[frozenset[str], frozenset[str]]:
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


# -- topics ------------------------------------------------------------------------------------------
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
    low = _PHRASES.sub(lambda m: _ABBREVIATIONS.get(m.group(1), m.group(1)).replace(" ", "-"), _clean(text).casefold())
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
