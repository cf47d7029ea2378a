"""A team chat bot's calls to the taskzilla-sleep worker, with the package's typed client.

    TASKZILLA_URL=http://127.0.0.1:8765 TASKZILLA_TEAM=platform \
    TASKZILLA_READ_TOKEN=... TASKZILLA_WRITE_TOKEN=... python examples/python-bot/bot.py

Two tokens for one team: the read token recalls and lists, the write token ingests, resolves and
forgets. Exit 0 when every check held, 1 when one did not.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from taskzilla_sleep.client import ApiError, Client
from taskzilla_sleep.core.models import EpisodeIn, Provenance

T = TypeVar("T")
GUEST = "guest-visitor"  # the author who asks to be forgotten


def messages(team: str) -> list[EpisodeIn]:
    now = datetime.now(UTC)
    said = [
        ("lena", "human", "The on-call handover is every Monday at 10:00 in #ops."),
        ("martin", "human", "Reminder: on-call handover happens Mondays at 10:00."),
        ("sara", "human", "We do the on-call handover on Monday mornings at 10."),
        (GUEST, "human", "As a guest I joined the on-call handover on Monday, thanks all."),
        ("helper-bot", "ai-draft", "Draft answer: the on-call handover might be on Tuesdays?"),
    ]
    return [
        EpisodeIn(
            id=f"{team}-py-bot-{i}",  # stable ids: sending the batch again stores nothing twice
            team=team,
            channel="ops",
            author=author,
            text=text,
            ts=now - timedelta(minutes=len(said) - i),
            provenance=Provenance(kind),
        )
        for i, (author, kind, text) in enumerate(said)
    ]


def patiently(call: Callable[[], T]) -> T:
    """Busy (429: ingests queued, or a night holds the memory) means: retry after Retry-After."""
    for _ in range(5):
        try:
            return call()
        except ApiError as err:
            if err.status != 429:
                raise
            time.sleep(err.retry_after or 1)
    return call()


def main() -> int:
    url, team = os.environ["TASKZILLA_URL"], os.environ["TASKZILLA_TEAM"]
    with (
        Client(url, token=os.environ["TASKZILLA_READ_TOKEN"], team=team) as reader,
        Client(url, token=os.environ["TASKZILLA_WRITE_TOKEN"], team=team) as writer,
    ):
        problems = run(reader, writer, team)
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    print("ok" if not problems else "failed")
    return 1 if problems else 0


def run(reader: Client, writer: Client, team: str) -> list[str]:
    """What one bot does with its two tokens; returns what went wrong (nothing, hopefully)."""
    problems: list[str] = []

    stored = patiently(lambda: writer.ingest(messages(team)))
    print(f"ingested: {stored.new} new, {stored.present} already present")

    found = reader.recall("when is the on-call handover?", k=8)
    print(f"recall: {len(found.items)} items")
    for item in found.items:
        cite = f"{item.author} in #{item.channel}" if item.kind == "episode" else f"{item.evidence_count} messages"
        when = f"{item.time:%Y-%m-%d %H:%M}" if item.time else "no time"
        print(f"  [{item.kind}] {item.text!r} ({cite}, {when})")
        if item.team != team:
            problems.append(f"recall returned an item of team {item.team}")
        if item.draft or item.provenance == Provenance.AI_DRAFT:
            problems.append(f"recall returned the bot's own draft {item.id}")

    open_ones = reader.contradictions()
    print(f"contradictions open: {len(open_ones)}")
    if open_ones:
        first = open_ones[0]
        print(f"  old: {first.old!r}\n  new: {first.new!r}")
        done = writer.resolve(first.contradiction.id, "new", note="confirmed by the python bot")
        print(f"resolved {done.id}: keep {done.resolution}, by {done.resolved_by}")

    report = patiently(lambda: writer.forget("asked to be forgotten", author=GUEST))
    print(f"forgot {GUEST}: {report.summary()}")
    if any(i.author == GUEST for i in reader.recall("on-call handover guest", k=20).items):
        problems.append(f"{GUEST} is still recalled after forget")

    try:
        reader.ingest(messages(team)[:1])
        problems.append("the read token was allowed to write")
    except ApiError as err:
        print(f"read token refused a write: {err.status} {err.code}")
        if err.status != 403:
            problems.append(f"the read token's write got {err.status}, not 403")
    return problems


if __name__ == "__main__":
    sys.exit(main())
