"""What an alert says, whatever the channel: the contradiction (or summary) message as data.

The message is built once, when the alert is queued, and stored as JSON in the outbox: every
retry renders the same content. Its sections are plain text; ``render.py`` turns them into a
Slack, Telegram or webhook body and decides what to shorten (never an ``essential`` section).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from taskzilla_sleep.core.models import PATTERN_LIVE, Contradiction, ContradictionKind, Episode, Pattern, PatternStatus
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.rules.resolution import KEEP_CHOICES, resolve_command
from taskzilla_sleep.stores.ports import AlertKind, AlertRecord

EXAMPLES_PER_BELIEF = 2
EXAMPLE_CHARS = 160
HOW_HEADINGS = ("*How to confirm*", "*How to resolve*")  # as Slack shows them (mrkdwn bold)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Example(_Frozen):
    """One episode that supports a belief, as shown in chat (text already on one line and shortened)."""

    episode_id: str
    author: str
    channel: str
    ts: datetime
    text: str


class Belief(_Frozen):
    """One side of a contradiction: the statement and its evidence ledger."""

    id: str
    statement: str
    kind: str
    status: str
    evidence: int  # supporting episodes
    against: int  # counter-evidence
    confidence: float
    first_seen: datetime
    last_seen: datetime
    examples: tuple[Example, ...] = ()


class HttpResolve(_Frozen):
    method: Literal["POST"] = "POST"
    path: str
    body: dict[str, str]


class Resolve(_Frozen):
    """Exactly how a person resolves the contradiction, on the command line or over HTTP."""

    contradiction_id: str
    cli: str
    http: HttpResolve
    options: dict[str, str]


class Section(_Frozen):
    """A block of the message. Renderers map it to a Slack section, Telegram HTML or plain text."""

    heading: str | None = None
    body: str = ""
    code: tuple[str, ...] = ()  # commands, shown verbatim (monospace where the channel has it)
    essential: bool = False  # never trimmed to fit a channel's limit (who/what and how to resolve)
    how: bool = False  # how to decide: stale once a person decided (dropped when Slack updates the alert)


class AlertMessage(_Frozen):
    """What an alert says, independent of the channel: title, sections (plain text) and structured fields."""

    kind: AlertKind
    id: str  # the contradiction id, or the summary key
    team: str | None = None
    title: str
    sections: tuple[Section, ...]
    reason: str | None = None
    contradiction_kind: str | None = None  # "update" (a change to confirm) or "disagreement"
    opened_at: datetime | None = None
    old: Belief | None = None
    new: Belief | None = None
    resolve: Resolve | None = None
    console_url: str | None = None  # the contradiction's page in the console (api.public_url is set)
    # A resolution (kind "resolution"): what was decided, by whom, and the channel's id of the alert
    # it answers (a Telegram message_id), when the channel gave one.
    resolution: str | None = None
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    note: str | None = None
    reply_to: str | None = None

    @property
    def text(self) -> str:
        """The whole message as plain text."""
        return render_plain(self)


def _day(t: datetime, tz: tzinfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d")


def _minute(t: datetime, tz: tzinfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z").strip()


def _belief(p: Pattern, examples: Sequence[Episode]) -> Belief:
    return Belief(
        id=p.id,
        statement=p.statement,
        kind=p.kind.value,
        status=p.status.value,
        evidence=p.support_count,
        against=p.counter_count,
        confidence=round(p.confidence, 4),
        first_seen=p.first_seen,
        last_seen=p.last_seen,
        examples=tuple(
            Example(episode_id=e.id, author=e.author, channel=e.channel, ts=e.ts, text=one_line(e.text, EXAMPLE_CHARS))
            for e in list(examples)[:EXAMPLES_PER_BELIEF]
        ),
    )


def _belief_section(label: str, b: Belief, tz: tzinfo) -> Section:
    plural = "" if b.evidence == 1 else "s"
    against = f", {b.against} against" if b.against else ""
    lines = [
        f"\u201c{b.statement}\u201d",
        f"Evidence: {b.evidence} episode{plural}{against} · confidence {b.confidence:.2f} · "
        f"first seen {_day(b.first_seen, tz)} · last seen {_day(b.last_seen, tz)}",
    ]
    if b.examples:
        lines.append("Examples:")
        lines += [f"- {e.author}, {_minute(e.ts, tz)} in {e.channel}: \u201c{e.text}\u201d" for e in b.examples]
    # Not essential: if a channel's limit bites, the examples at the end go first.
    return Section(heading=f"{label} belief {b.id} ({b.status})", body="\n".join(lines))


def resolve_instructions(contradiction_id: str) -> Resolve:
    """The command line and the HTTP call that resolve ``contradiction_id``, and what each choice does."""
    body = {"keep": KEEP_CHOICES, "note": "..."}  # who decides is the API token's name
    return Resolve(
        contradiction_id=contradiction_id,
        cli=resolve_command(contradiction_id, note=True),
        http=HttpResolve(path=f"/v1/contradictions/{contradiction_id}/resolve", body=body),
        options={
            "new": "the new belief holds; the old one is superseded (archived with who, when and why)",
            "old": "the old belief holds; the new one is superseded",
            "both": "both hold (e.g. in different contexts); both stay in use (active or tentative, by evidence)",
        },
    )


def format_contradiction(
    c: Contradiction,
    old: Pattern,
    new: Pattern,
    old_examples: Sequence[Episode],
    new_examples: Sequence[Episode],
    *,
    tz: tzinfo = UTC,
    console_url: str | None = None,
) -> AlertMessage:
    """The alert for one contradiction: both beliefs, their evidence, the id and how to resolve it.

    An update (the team changed a practice) asks for one confirming command; a disagreement asks
    a person to choose. ``tz`` is the team's zone for the dates shown (the worker passes
    ``schedule.timezone``).
    """
    ob, nb = _belief(old, old_examples), _belief(new, new_examples)
    how = resolve_instructions(c.id)
    choices = "\n".join(f"--keep {k}: {v}" for k, v in how.options.items())
    if c.kind is ContradictionKind.UPDATE:
        people = sorted({e.author for e in new_examples}) or ["the people who wrote the new messages"]
        confirm = resolve_command(c.id, keep="new")
        title = f"Change in {c.team} to confirm: {one_line(new.statement, 80)}"
        intro = (
            f"The team seems to have changed a practice on {_day(new.first_seen, tz)}: from "
            f"\u201c{one_line(old.statement, 200)}\u201d to \u201c{one_line(new.statement, 200)}\u201d. "
            f"Confirm with {', '.join(people)}. Until a person decides, the bot uses the new belief marked "
            "\u201cchanged, awaiting confirmation\u201d and the old one is contested; nothing is superseded. "
            f"(Update {c.id}, opened {_minute(c.opened_at, tz)}.)"
        )
        resolve = Section(
            heading=HOW_HEADINGS[0].strip("*"),
            body=f"If the change is real, confirm it with one command:\n{confirm}\nOtherwise:\n{choices}",
            code=(confirm, how.cli, f"{how.http.method} {how.http.path} {json.dumps(how.http.body)}"),
            essential=True,
            how=True,
        )
    else:
        title = f"Contradiction in {c.team}: people disagree"
        intro = (
            f"Contradiction {c.id} in team {c.team}, opened {_minute(c.opened_at, tz)}. People disagree: "
            "two beliefs are held at the same time. Both are kept and marked contested; nothing changes "
            "until a person decides."
        )
        resolve = Section(
            heading=HOW_HEADINGS[1].strip("*"),
            body=f"Decide which belief holds:\n{choices}\nThen run one of:",
            code=(how.cli, f"{how.http.method} {how.http.path} {json.dumps(how.http.body)}"),
            essential=True,
            how=True,
        )
    if c.reason.strip():
        why = "Why it looks like a change" if c.kind is ContradictionKind.UPDATE else "Why they conflict"
        intro += f"\n{why}: {one_line(c.reason, 300)}"
    return AlertMessage(
        kind="contradiction",
        id=c.id,
        team=c.team,
        contradiction_kind=c.kind.value,
        title=title,
        sections=(
            Section(body=intro, essential=True),
            _belief_section("OLD", ob, tz),
            _belief_section("NEW", nb, tz),
            resolve,
        ),
        reason=c.reason or None,
        opened_at=c.opened_at,
        old=ob,
        new=nb,
        resolve=how,
        console_url=console_url,
    )


def console_link(public_url: str | None, contradiction_id: str) -> str | None:
    """The console page of a contradiction under ``api.public_url`` (None when that is not set)."""
    return f"{public_url.rstrip('/')}/ui/contradictions/{quote(contradiction_id, safe='')}" if public_url else None


def resolution_line(c: Contradiction) -> str:
    """What a resolution says in chat: "resolved by slack:U123 (alice): kept new"."""
    what = f"kept {c.resolution}" if c.resolution else "closed"
    return f"resolved by {c.resolved_by or 'someone'}: {what}" + (f" ({one_line(c.note, 200)})" if c.note else "")


def _held(p: Pattern) -> str:
    return f"\u201c{one_line(p.statement, 200)}\u201d ({p.status.value})"


def what_recall_uses(c: Contradiction, beliefs: Sequence[Pattern]) -> str:
    """After a decision, what the bot now uses: the statement(s) recall returns, and the one it no
    longer returns (``beliefs``: the contradiction's two beliefs as stored after the decision)."""
    by_id = {p.id: p for p in beliefs}
    sides = [by_id[i] for i in (c.old_pattern_id, c.new_pattern_id) if i in by_id]
    used = [p for p in sides if p.status in PATTERN_LIVE and p.superseded_by is None]
    gone = [p for p in sides if p not in used]
    if not used:
        lines = ["Recall returns neither belief now."]
    elif len(used) == 1:
        lines = [f"The bot now uses: {_held(used[0])}."]
    else:
        lines = [f"The bot now uses both: {_held(used[0])} and {_held(used[1])}."]
    if any(p.status is PatternStatus.TENTATIVE for p in used):
        lines.append("A tentative belief is returned, ranked below active ones, until more evidence lifts it.")
    lines += [f"No longer used: {_held(p)}." for p in gone]
    return "\n".join(lines)


def format_resolution(
    c: Contradiction,
    beliefs: Sequence[Pattern],
    reply_to: str | None = None,
    console_url: str | None = None,
) -> AlertMessage:
    """The answer to a delivered contradiction alert once a person resolved it (any way: chat,
    console, command line, API): who decided what (the title), and what the bot now uses (the body,
    from ``beliefs``: the two beliefs as stored after the decision)."""
    line = resolution_line(c)
    by_id = {p.id: p for p in beliefs}
    old, new = by_id.get(c.old_pattern_id), by_id.get(c.new_pattern_id)
    body = what_recall_uses(c, beliefs)
    return AlertMessage(
        kind="resolution",
        id=c.id,
        team=c.team,
        title=f"Contradiction {c.id} in {c.team} {line}",
        sections=(Section(body=body, essential=True),),
        contradiction_kind=c.kind.value,
        opened_at=c.opened_at,
        old=_belief(old, ()) if old else None,
        new=_belief(new, ()) if new else None,
        console_url=console_url,
        resolution=c.resolution,
        resolved_by=c.resolved_by,
        resolved_at=c.resolved_at,
        note=c.note,
        reply_to=reply_to,
    )


def format_withdrawal(alert: AlertRecord, change_id: str, by: str, reason: str, at: datetime) -> AlertMessage:
    """The follow-up to a delivered contradiction alert whose contradiction an undo took back: the run
    that raised it was undone, so there is nothing left to decide."""
    cid = alert.contradiction_id or alert.key
    try:
        link = AlertMessage.model_validate_json(alert.payload_json).console_url
    except ValueError:  # a payload this version cannot read: the follow-up goes without the link
        link = None
    body = (
        f"Contradiction {cid} was withdrawn: {by} undid {change_id}, the run that raised it ({one_line(reason, 200)}). "
        "Nothing to decide: both beliefs are as they were before that run."
    )
    return AlertMessage(
        kind="resolution",
        id=cid,
        team=alert.team,
        title=f"Contradiction {cid} in {alert.team} withdrawn (run undone)",
        sections=(Section(body=body, essential=True),),
        console_url=link,
        resolution="withdrawn",
        resolved_by=by,
        resolved_at=at,
        note=reason,
        reply_to=alert.message_ref,
    )


def format_summary(
    text: str, *, key: str = "summary", team: str | None = None, title: str = "Nightly memory summary"
) -> AlertMessage:
    """An optional nightly summary (``alerts.nightly_summary``): free text, trimmed per channel."""
    return AlertMessage(kind="summary", id=key, team=team, title=title, sections=(Section(body=text.strip()),))


def _section_plain(s: Section) -> str:
    parts = [p for p in (s.heading, s.body) if p]
    parts += [f"  {c}" for c in s.code]
    return "\n".join(parts)


def render_plain(msg: AlertMessage) -> str:
    """The whole message as plain text: the title, then each section (commands indented)."""
    return "\n\n".join([msg.title, *(_section_plain(s) for s in msg.sections)])
