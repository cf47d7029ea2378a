"""Writes taskzilla_sleep/data/sample_week.jsonl: a week of a small team, written by us.

Deterministic (seeded). Planted: team habits stated in different words by different people,
one habit that changes mid-week (async standup -> voice standup), a person's declared facts,
the bot's own drafts (ai-draft: never learned from), GitHub notifications (skipped by write
discipline) and plenty of "looks good" / "+1" noise. Run: python ops/make_sample_week.py
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

TZ = timezone(timedelta(hours=1))  # Europe/Amsterdam in November (CET)
MONDAY = datetime(2026, 11, 23, tzinfo=TZ)
PEOPLE = ["martin", "sara", "joost", "priya", "lena"]

# (day, "HH:MM", channel, author, provenance, text)
PLANTED = [
    # habit 1: small PRs (four people, four wordings, across days)
    (
        0,
        "10:12",
        "dev",
        "martin",
        "human",
        "Please keep PRs small, under 300 changed lines, so reviews stay quick.",
    ),
    (
        1,
        "11:40",
        "dev",
        "sara",
        "human",
        "Can we split big pull requests into smaller ones? Small PRs get reviewed the same day.",
    ),
    (
        2,
        "14:05",
        "dev",
        "joost",
        "human",
        "Reminder for everyone: small, scoped pull requests please, big PRs sit in review for days.",
    ),
    (3, "09:58", "dev", "priya", "human", "Keep your PRs small and focused, one change per pull request."),
    # habit 2: no Friday deploys
    (0, "16:30", "ops", "lena", "human", "No deploys to production on Fridays, we don't want weekend pages."),
    (
        2,
        "17:10",
        "ops",
        "martin",
        "human",
        "We never ship to production on a Friday, it's our deploy freeze day.",
    ),
    (4, "13:45", "ops", "sara", "human", "Friday is deploy freeze: nothing goes to production today."),
    # habit 3: on-call handoff
    (
        0,
        "10:02",
        "ops",
        "priya",
        "human",
        "On-call handoff is Monday 10:00 in #ops, with the runbook link in the message. @lena you're up.",
    ),
    (
        1,
        "09:20",
        "ops",
        "lena",
        "human",
        "Handoff of on-call happens every Monday at ten in #ops, always include the runbook link.",
    ),
    (
        3,
        "15:30",
        "ops",
        "joost",
        "human",
        "For the on-call handoff on Monday at 10:00 please post the runbook link in #ops.",
    ),
    # habit 4 that changes mid-week: async standup -> voice standup
    (
        0,
        "09:05",
        "standup",
        "martin",
        "human",
        "Standup is async: post your update in #standup before 10:00 (yesterday, today, blockers).",
    ),
    (
        1,
        "09:12",
        "standup",
        "priya",
        "human",
        "Async standup reminder: write your update in the standup channel by 10.",
    ),
    (
        2,
        "09:31",
        "standup",
        "joost",
        "human",
        "Our standup is async, write yesterday/today/blockers in #standup before ten.",
    ),
    (
        3,
        "09:02",
        "standup",
        "sara",
        "human",
        "From now on standup is a voice call at 09:30 instead of async posts.",
    ),
    (
        3,
        "09:40",
        "standup",
        "martin",
        "human",
        "We switched to voice standups at 9:30, no more async updates in the channel.",
    ),
    (4, "09:25", "standup", "lena", "human", "Standup is a 9:30 voice call now, not async anymore."),
    # a person's declared facts (pinned with `facts pin`, never decayed)
    (
        0,
        "09:00",
        "random",
        "martin",
        "human",
        "For the new folks: I'm Martin Vos, engineering manager of the platform team.",
    ),
    # the bot's own drafts: never learned from, however often they repeat
    (
        1,
        "12:00",
        "dev",
        "taskzilla",
        "ai-draft",
        "Draft: let's deploy on Fridays to get features out faster.",
    ),
    (2, "12:00", "dev", "taskzilla", "ai-draft", "Draft: deploying on Fridays would speed up our releases."),
    (
        3,
        "12:00",
        "dev",
        "taskzilla",
        "ai-draft",
        "Draft: we could ship to production on Fridays to release faster.",
    ),
    # imported from the team wiki
    (
        0,
        "08:00",
        "wiki",
        "import-bot",
        "import",
        "Runbooks live in the ops/runbooks folder of the platform repo.",
    ),
    (
        0,
        "08:00",
        "wiki",
        "import-bot",
        "import",
        "The billing-api is owned by the platform team; #billing is its channel.",
    ),
]
NOTIFICATIONS = [
    "[github] PR #{n} merged by {p}",
    "[github] {p} opened pull request #{n}",
    "https://github.com/acme/platform/pull/{n}",
]
NOISE = [
    "looks good",
    "+1",
    "lgtm",
    "LGTM!",
    "looks good to me",
    "thanks!",
    "morning!",
    "good morning all",
    "lunch?",
    "haha",
    "nice",
    "👍",
    "brb",
    "on it",
    "ok",
    "sounds good",
    "ty",
    "+1 from me",
    "coffee anyone?",
    "back",
    "great work",
    "agreed",
    "will do",
    "done",
    "merged",
    "cool",
]
OFFTOPIC = [
    "anyone watched the match last night?",
    "the coffee machine on 3 is broken again",
    "it's raining in Amsterdam, shocking",
    "who took the last stroopwafel",
    "happy birthday @priya!",
    "the train was late again",
    "new keyboard arrived, so clicky",
    "pizza friday?",
]


def main() -> None:
    rnd = random.Random(20261123)
    rows = []
    for day, hhmm, channel, author, prov, text in PLANTED:
        h, m = map(int, hhmm.split(":"))
        rows.append((MONDAY + timedelta(days=day, hours=h, minutes=m), channel, author, prov, text))
    for day in range(5):
        base = MONDAY + timedelta(days=day)
        for _ in range(16):
            t = base + timedelta(hours=rnd.randint(9, 17), minutes=rnd.randint(0, 59), seconds=rnd.randint(0, 59))
            rows.append(
                (
                    t,
                    rnd.choice(["dev", "ops", "random", "standup"]),
                    rnd.choice(PEOPLE),
                    "human",
                    rnd.choice(NOISE),
                )
            )
        for _ in range(3):
            t = base + timedelta(hours=rnd.randint(9, 17), minutes=rnd.randint(0, 59))
            rows.append((t, "random", rnd.choice(PEOPLE), "human", rnd.choice(OFFTOPIC)))
        for _ in range(3):
            t = base + timedelta(hours=rnd.randint(9, 17), minutes=rnd.randint(0, 59))
            text = rnd.choice(NOTIFICATIONS).format(n=rnd.randint(400, 480), p=rnd.choice(PEOPLE))
            rows.append((t, "dev", "github", "bot", text))
        t = base + timedelta(hours=9, minutes=50)
        rows.append((t, "standup", "taskzilla", "bot", "Reminder: standup updates are due in 10 minutes."))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[4]))
    out = Path(__file__).resolve().parent.parent / "taskzilla_sleep" / "data" / "sample_week.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for t, channel, author, prov, text in rows:
            obj = {
                "team": "platform",
                "channel": channel,
                "author": author,
                "text": text,
                "ts": t.isoformat(),
                "provenance": prov,
            }
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} episodes to {out}")


if __name__ == "__main__":
    main()
