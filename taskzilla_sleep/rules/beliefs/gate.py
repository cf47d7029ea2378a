"""The belief gate: only a statement of a reusable belief — a norm, process, preference or stable
fact of the team — may support or be absorbed into a pattern.

Questions, replies addressed to one person, first-person anecdotes and status updates, one-off
logistics and chatter never do, however many people wrote them. Precision first: absorbing is
destructive, so what is unclear is left out.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import StrEnum
from functools import lru_cache

from taskzilla_sleep.rules.beliefs.lint import injection
from taskzilla_sleep.rules.beliefs.reading import sentences, words


class Kind(StrEnum):
    BELIEF = "belief"
    QUESTION = "question"
    ADDRESSED = "addressed"  # a reply to one person
    PERSONAL = "personal"  # a first-person anecdote, experience or plan
    STATUS = "status"  # a work status update
    LOGISTICS = "logistics"  # a one-off arrangement
    CHATTER = "chatter"
    INJECTION = "injection"


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
    r"(^|[:;,.!]\s*|\bso\s+)(no|never) (?!idea|worries|problem|clue|way|thanks|luck|rush|stress|new\b)\w+", re.I
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
    r"from (today|tomorrow|monday|tuesday|wednesday|thursday|friday|next|this) on|as of|anymore|"
    # "starting" only with the time it starts from: "Bloom meeting starting." reports, it does not last.
    r"(from|since|starting|beginning) (today|tomorrow|now|monday|tuesday|wednesday|thursday|friday|"
    r"(this|next) (week|month|sprint|release|quarter))|"
    r"(starting|beginning)( on| in)? (\d{1,2}(st|nd|rd|th)?\b|jan|feb|march|april|june|july|aug|sept?|oct|nov|dec)|"
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
# Words that look like a team marker and are not one: a request for eyes on something just posted
# ("postmortem draft up, reviews pls", "doc is up, comments welcome", "PTAL") asks once, it is no
# rule; "the team drive" is a place, not the team speaking.
_NO_MARKER = re.compile(
    r"\b(reviews?|feedback|eyes|thoughts|comments|input|a look|approvals?)\s+(pls|plz|please|welcome|appreciated)\b|"
    r"\b(pls|plz|please)\s+(review|take a look|have a look|comment|approve)\b"
    r"(?=\s*(it|this|them|thanks|thx|ty)?\s*([.!,;]|$))|"
    r"\bptal\b|"
    r"\b(the\s+)?team(['’]s)?\s+(drive|calendar|wiki|folder|sheet|spreadsheet|inbox|mailbox|lunch|dinner|offsite|photo|"
    r"outing|drinks|party)\b",
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
    stated = [_NO_MARKER.sub(" ", s) for s in stated]
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
