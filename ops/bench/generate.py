"""A seeded, deterministic synthetic busy team: episodes (the ``ingest`` JSONL format) + gold labels.

    python ops/bench/generate.py --out DIR [--seed 7] [--people 12] [--channels 6] [--days 30]
                                 [--per-day 2000] [--start 2026-10-12]

writes ``DIR/episodes.jsonl`` (one episode a line, ``ts`` with Europe/Amsterdam offsets, explicit
ids ``syn-dDD-NNNNN``) and ``DIR/gold.json``. What is planted:

- **team habits**, each stated at least 3 times in different words (paraphrase templates, not
  one sentence with a synonym swapped) by different people on different days; some are first
  *taught in a burst* (three people within ~70 minutes: what the daytime watchdog is for);
- **changes of habit** at known days: from that day on the habit is stated the new way, as a
  change ("from now on …", "we switched to …", "… not … anymore") — a contradiction to flag;
- **pinned facts** (declared by a person; the bench pins them with ``facts pin``);
- **ai-drafts**: the bot's own drafts restating a habit *wrongly* — never to be learned;
- a **majority of noise**: "looks good", "+1", greetings, off-topic chat, work chatter with
  varying details, CI/deploy bot lines, and GitHub notifications (skipped by write discipline).

Same arguments, same bytes: every choice comes from one ``random.Random(seed)``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

TZ = ZoneInfo("Europe/Amsterdam")
TEAM = "platform"
BOT = "taskzilla"

PEOPLE = [
    "martin", "sara", "joost", "priya", "lena", "tom", "aisha", "bram", "chen", "eva", "noah", "fatima",
    "lucas", "mei", "oscar", "ruth", "sven", "yara", "daan", "ines",
]  # fmt: skip
CHANNELS = ["dev", "ops", "standup", "random", "releases", "support", "infra", "design", "data", "security"]

# -- planted habits -----------------------------------------------------------------------------
# Each habit: a canonical statement (gold), its home channel, paraphrase templates. Templates are
# different sentences for the same rule; {o} is an optional opener, {c} an optional closer.


@dataclass(frozen=True)
class HabitSpec:
    key: str
    channel: str
    canonical: str
    templates: tuple[str, ...]
    statements: int = 8  # how many times it is stated over the period (at least 3)
    burst: bool = False  # first taught in a burst of three within ~70 minutes
    echoes: tuple[str, ...] = ()  # how the others in a burst confirm it, in their own words


HABITS: tuple[HabitSpec, ...] = (
    HabitSpec(
        "small_prs",
        "dev",
        "Keep pull requests small (under 300 changed lines) so reviews stay quick.",
        (
            "{o}please keep PRs small, under 300 changed lines, so reviews stay quick{c}",
            "{o}can we split big pull requests into smaller ones? small PRs get reviewed the same day{c}",
            "{o}small, scoped pull requests please, big PRs sit in review for days{c}",
            "{o}keep your PRs focused: one change per pull request, a few hundred lines at most{c}",
            "{o}if your diff is over 300 lines, break it up before asking for review{c}",
            "{o}we want PRs that a reviewer can read in ten minutes, so keep them small{c}",
            "{o}huge pull requests are hard to review, split them into small chunks{c}",
        ),
    ),
    HabitSpec(
        "friday_freeze",
        "ops",
        "No production deploys on Fridays.",
        (
            "{o}no deploys to production on Fridays, we don't want weekend pages{c}",
            "{o}we never ship to production on a Friday, it's our deploy freeze day{c}",
            "{o}Friday is deploy freeze: nothing goes to production today{c}",
            "{o}please hold your prod release until Monday, we don't deploy on Fridays{c}",
            "{o}remember the rule: production stays untouched on Fridays{c}",
            "{o}it's Friday, so no production rollouts, park it for Monday{c}",
        ),
    ),
    HabitSpec(
        "oncall_handoff",
        "ops",
        "On-call handoff is Monday 10:00 in #ops, with the runbook link.",
        (
            "{o}on-call handoff is Monday 10:00 in #ops, with the runbook link in the message{c}",
            "{o}handoff of on-call happens every Monday at ten in #ops, always include the runbook link{c}",
            "{o}for the on-call handoff on Monday at 10:00 please post the runbook link in #ops{c}",
            "{o}Monday 10am is the on-call swap, do it in #ops and link the runbook{c}",
            "{o}when you hand over on-call on Monday morning, post it in #ops with the runbook{c}",
        ),
        statements=7,
    ),
    HabitSpec(
        "review_sla",
        "dev",
        "Review requested pull requests within one working day.",
        (
            "{o}please review PRs you're tagged on within one working day{c}",
            "{o}our review turnaround is one business day, don't let requests sit longer{c}",
            "{o}if someone asks you for a review, get to it by the next working day{c}",
            "{o}reviews should not wait more than a day, that's the team agreement{c}",
            "{o}respond to review requests within 24 working hours please{c}",
            "{o}nobody should wait more than a working day for a code review from us{c}",
        ),
    ),
    HabitSpec(
        "staging_first",
        "releases",
        "Every change goes through staging before production.",
        (
            "{o}everything goes to staging first, never straight to production{c}",
            "{o}deploy to staging and check it there before you promote to prod{c}",
            "{o}no change reaches production without a staging run first{c}",
            "{o}always let a release soak on staging before it goes to production{c}",
            "{o}staging before prod, every single time, no exceptions{c}",
        ),
        burst=True,
        echoes=(
            "{o}agreed, every change goes to staging first, then production{c}",
            "{o}+1, always staging before production, never straight to prod{c}",
        ),
    ),
    HabitSpec(
        "postmortem",
        "ops",
        "Write a blameless postmortem within 48 hours of an incident.",
        (
            "{o}every incident gets a blameless postmortem within 48 hours{c}",
            "{o}please write the postmortem within two days of the incident, and keep it blameless{c}",
            "{o}postmortems are due 48h after an outage, focus on causes, not people{c}",
            "{o}after an incident we always do a blameless write-up within two days{c}",
            "{o}the incident owner writes a no-blame postmortem in the first 48 hours{c}",
        ),
        statements=6,
    ),
    HabitSpec(
        "conventional_commits",
        "dev",
        "Commit messages follow the Conventional Commits format.",
        (
            "{o}commit messages should follow conventional commits, feat: / fix: / chore:{c}",
            "{o}please use the conventional commit format for your commit messages{c}",
            "{o}prefix your commits with feat, fix or chore like the conventional commits spec says{c}",
            "{o}we write commit messages as conventional commits so the changelog builds itself{c}",
            "{o}stick to conventional commits in commit messages, the release tooling depends on it{c}",
        ),
        statements=6,
    ),
    HabitSpec(
        "feature_flags",
        "dev",
        "Risky changes ship behind a feature flag.",
        (
            "{o}put risky changes behind a feature flag so we can turn them off without a deploy{c}",
            "{o}anything risky ships dark behind a flag first{c}",
            "{o}please wrap big behaviour changes in a feature flag{c}",
            "{o}we always use a feature flag for changes that could break checkout{c}",
            "{o}new risky code paths must be guarded by a feature flag{c}",
        ),
        burst=True,
        echoes=(
            "{o}agreed, risky changes go behind a feature flag first{c}",
            "{o}+1, always put risky changes behind a feature flag{c}",
        ),
    ),
    HabitSpec(
        "release_notes",
        "releases",
        "Post release notes in #releases for every production deploy.",
        (
            "{o}post release notes in #releases for every production deploy{c}",
            "{o}every prod deploy needs a short release note in the releases channel{c}",
            "{o}don't forget the release notes in #releases after you deploy to production{c}",
            "{o}when you ship to prod, write what changed in #releases{c}",
            "{o}each production release gets its notes posted in #releases{c}",
        ),
        statements=7,
    ),
    HabitSpec(
        "support_sla",
        "support",
        "Customer support tickets get a first answer within 4 hours.",
        (
            "{o}support tickets get a first reply within 4 hours{c}",
            "{o}please answer new customer tickets within four hours, even if it's just an ack{c}",
            "{o}our first-response target for support tickets is four hours{c}",
            "{o}no customer ticket should wait more than 4h for a first answer{c}",
            "{o}first response on support tickets within four hours, that's the promise to customers{c}",
        ),
        statements=7,
    ),
    HabitSpec(
        "design_docs",
        "design",
        "Work bigger than a week starts with a design doc.",
        (
            "{o}anything bigger than a week of work starts with a design doc{c}",
            "{o}please write a design doc before starting on a multi-week project{c}",
            "{o}for work longer than a week we want a short design doc reviewed first{c}",
            "{o}big pieces of work need a design doc up front, at least a page{c}",
            "{o}no project over a week without a design doc that someone reviewed{c}",
        ),
        statements=6,
    ),
    HabitSpec(
        "no_secrets",
        "security",
        "Never paste secrets in chat; share them through the vault.",
        (
            "{o}never paste secrets or tokens in chat, use the vault{c}",
            "{o}please share credentials through the vault, never in a channel{c}",
            "{o}passwords and API keys go in the vault, not in Slack messages{c}",
            "{o}do not post tokens in chat, rotate them if you did and use the vault{c}",
            "{o}secrets only travel through the vault, never copy them into chat{c}",
        ),
        statements=6,
    ),
    HabitSpec(
        "data_backups",
        "data",
        "Take a backup before running a database migration.",
        (
            "{o}take a backup before you run any database migration{c}",
            "{o}always snapshot the database before a migration{c}",
            "{o}no schema migration without a fresh backup first{c}",
            "{o}please make a DB backup before migrating, every time{c}",
            "{o}run the backup job before you apply a migration to the database{c}",
        ),
        statements=6,
        burst=True,
        echoes=(
            "{o}yes, always take a database backup before any migration{c}",
            "{o}+1, backup first, then run the database migration{c}",
        ),
    ),
    HabitSpec(
        "infra_terraform",
        "infra",
        "Infrastructure changes go through Terraform, never the console.",
        (
            "{o}all infrastructure changes go through terraform, never click in the console{c}",
            "{o}please don't change cloud resources by hand, do it in terraform{c}",
            "{o}infra is managed with terraform only, console edits get overwritten{c}",
            "{o}if you need a new bucket or VM, write the terraform for it{c}",
            "{o}we always make infra changes as terraform PRs, no manual console changes{c}",
        ),
        statements=6,
    ),
)

# Changes of habit: the old way is stated before ``day_fraction`` of the period, the new way from
# then on. Every new-way template carries a change cue, as people announce a change as a change.


@dataclass(frozen=True)
class ChangeSpec:
    key: str
    channel: str
    old: HabitSpec
    new: HabitSpec
    day_fraction: float


CHANGES: tuple[ChangeSpec, ...] = (
    ChangeSpec(
        "standup",
        "standup",
        HabitSpec(
            "standup_async",
            "standup",
            "Standup is async: post your update in #standup before 10:00.",
            (
                "{o}standup is async: post your update in #standup before 10:00{c}",
                "{o}async standup, write your update in the standup channel by 10{c}",
                "{o}our standup is async, write yesterday/today/blockers in #standup before ten{c}",
                "{o}no standup meeting, just post your async update in #standup before 10am{c}",
                "{o}drop your written standup update in the channel before ten o'clock{c}",
            ),
            statements=6,
        ),
        HabitSpec(
            "standup_voice",
            "standup",
            "Standup is a voice call at 09:30 (no more async posts).",
            (
                "{o}from now on standup is a voice call at 09:30 instead of async posts{c}",
                "{o}we switched to voice standups at 9:30, no more async updates in the channel{c}",
                "{o}standup is a 9:30 voice call now, not async anymore{c}",
                "{o}reminder that we moved to a live standup call at half past nine instead of written updates{c}",
                "{o}no more written standups, join the 09:30 call from now on{c}",
            ),
            statements=5,
        ),
        0.45,
    ),
    ChangeSpec(
        "approvals",
        "dev",
        HabitSpec(
            "two_approvals",
            "dev",
            "A pull request needs two approvals before merging.",
            (
                "{o}every pull request needs two approvals before it can be merged{c}",
                "{o}wait for two approving reviews before you hit merge{c}",
                "{o}two reviewers have to approve a PR before merge{c}",
                "{o}merging needs a second approval, one is not enough{c}",
                "{o}get two approvals on your PR before merging it{c}",
            ),
            statements=6,
        ),
        HabitSpec(
            "one_approval",
            "dev",
            "One approval is enough to merge a pull request (no longer two).",
            (
                "{o}from now on one approval is enough to merge, instead of two{c}",
                "{o}we no longer need two approvals, a single approving review is enough to merge{c}",
                "{o}switched to one approval for merging, two approvals are not required anymore{c}",
                "{o}no more waiting for a second reviewer, one approval is enough from now on{c}",
                "{o}one approving review is enough now, we dropped the two-approval rule instead{c}",
            ),
            statements=5,
        ),
        0.6,
    ),
    ChangeSpec(
        "focus_time",
        "random",
        HabitSpec(
            "focus_wednesday",
            "random",
            "No meetings on Wednesday afternoon: it is focus time.",
            (
                "{o}no meetings on Wednesday afternoon, that's our focus time{c}",
                "{o}please keep Wednesday afternoons free of meetings, it's focus time{c}",
                "{o}Wednesday after lunch is meeting-free focus time for the whole team{c}",
                "{o}don't book meetings on Wednesday afternoons, we protect that time for focus{c}",
                "{o}focus time is Wednesday afternoon, so no calls then{c}",
            ),
            statements=6,
        ),
        HabitSpec(
            "focus_thursday",
            "random",
            "Focus time moved to Thursday morning (no longer Wednesday afternoon).",
            (
                "{o}from now on focus time is Thursday morning instead of Wednesday afternoon{c}",
                "{o}we moved focus time to Thursday mornings, Wednesday afternoon is not meeting-free anymore{c}",
                "{o}focus time switched to Thursday morning, no more meeting-free Wednesday afternoons{c}",
                "{o}meeting-free time is Thursday morning from now on, not Wednesday afternoon{c}",
                "{o}starting today the no-meetings block is Thursday morning instead of Wednesday{c}",
            ),
            statements=5,
        ),
        0.35,
    ),
)

# Habits reserved for the watchdog: taught in a burst on the last day only (a rule taught at
# 10:00 should be recallable by ~10:35).
TAUGHT_LAST_DAY: tuple[HabitSpec, ...] = (
    HabitSpec(
        "incident_channel",
        "ops",
        "Every incident gets its own channel named inc-<date>-<topic>.",
        (
            "{o}every incident gets its own channel, named inc-date-topic{c}",
            "{o}please open a dedicated inc- channel for each incident, with the date and topic in the name{c}",
            "{o}for an incident we always create a separate inc-<date>-<topic> channel{c}",
            "{o}incidents are handled in their own inc- channel, never in #ops itself{c}",
        ),
        statements=3,
        burst=True,
        echoes=(
            "{o}+1, every incident gets its own inc- channel{c}",
            "{o}agreed, always a separate inc-<date>-<topic> channel for each incident{c}",
        ),
    ),
    HabitSpec(
        "dependency_updates",
        "dev",
        "Dependency update PRs are merged on Tuesdays.",
        (
            "{o}we merge the dependency update PRs on Tuesdays{c}",
            "{o}please leave renovate dependency bumps for Tuesday, that's when we merge them{c}",
            "{o}dependency upgrade pull requests go in on Tuesday, all at once{c}",
            "{o}Tuesday is dependency day, merge the bump PRs then{c}",
        ),
        statements=3,
        burst=True,
        echoes=(
            "{o}agreed, we merge the dependency update PRs on Tuesdays{c}",
            "{o}+1, dependency bump PRs get merged on Tuesday only{c}",
        ),
    ),
)

OPENERS = ("", "", "", "Reminder: ", "Quick note: ", "Friendly reminder, ", "As agreed, ", "Heads up: ", "FYI ")
CLOSERS = ("", "", "", ".", ".", "!", " please.", " thanks!", " 🙏", ", cheers.")

# -- pinned facts and the ai-drafts that get habits wrong ---------------------------------------

PINNED_FACTS = (
    {"text": "Martin Vos is the engineering manager of the platform team.", "by": "martin", "entity": "martin"},
    {"text": "Sara Jansen leads the on-call rotation.", "by": "sara", "entity": "sara"},
    {"text": "The platform team works for Acme Logistics BV.", "by": "martin", "entity": None},
)
FACT_DECLARATIONS = (
    ("martin", "random", "For the new folks: I'm Martin Vos, engineering manager of the platform team."),
    ("sara", "ops", "Hi all, Sara Jansen here, I lead the on-call rotation."),
    ("martin", "random", "We all work for Acme Logistics BV, the platform team is part of engineering."),
)
AI_DRAFTS = (
    "Draft: deploying to production on Fridays is fine as long as CI is green.",
    "Draft: big pull requests are okay, reviewers can take a few days.",
    "Draft: standup is optional, post an update whenever you like.",
    "Draft: you can skip staging for small changes and go straight to production.",
    "Draft: postmortems are only needed for incidents longer than a day.",
    "Draft: it's fine to paste a token in chat if you delete the message afterwards.",
    "Draft: reviews can wait until the end of the sprint.",
    "Draft: migrations are safe to run without a backup on small tables.",
    "Draft: quick infra fixes can be done in the cloud console directly.",
    "Draft: release notes are only needed for major versions.",
)

# -- noise ---------------------------------------------------------------------------------------

ACKS = (
    "looks good", "+1", "lgtm", "LGTM!", "looks good to me", "thanks!", "thank you", "ty", "👍", "ok", "okay",
    "on it", "merged", "nice", "nice one", "sounds good", "agreed", "will do", "done", "cool", "great work",
    "+1 from me", "yep", "sure", "haha", "lol", "brb", "back", "np", "👀", "🎉", "ack", "kk", "same", "true",
    "good catch", "fair enough", "makes sense", "works for me", "oh no", "wow", "yes please", "no worries",
)  # fmt: skip
GREETINGS = (
    "good morning all", "morning!", "morning everyone", "hi team", "hello!", "hey folks", "afternoon all",
    "bye, see you tomorrow", "off for today, bye", "have a nice evening", "good night", "hi all, back from holiday",
    "gm", "heading out, cheers",
)  # fmt: skip
OFFTOPIC = (
    "anyone up for {food} at {hour}?",
    "the coffee machine on floor {floor} is broken again",
    "did anyone watch {show} last night?",
    "it's {weather} in Amsterdam today, shocking",
    "who took the last {snack} from the kitchen",
    "happy birthday @{person}!",
    "the {line} train was late again this morning",
    "new {gadget} arrived, so happy with it",
    "{food} on friday?",
    "anyone going to the {event} next week?",
    "my cat just walked over my keyboard, sorry for the {emoji}",
    "is the office open on {weekday}?",
    "{person} brought {snack}, kitchen, now",
    "looking for a {gadget} recommendation, any tips?",
    "the heating on floor {floor} is off again",
    "who wants to join the {event} team?",
    "congrats @{person} on the new {thing2}!",
    "I'm working from home on {weekday}",
)
WORK = (
    "looking at {ticket} now",
    "deploying {service} {version} to staging",
    "CI is red on {branch}, investigating",
    "can someone have a look at #{pr}?",
    "{service} latency is back to normal",
    "pushed a fix for the {bug} in {service}",
    "meeting moved to {hour}",
    "who owns {service} these days?",
    "{service} error rate went up after {version}, checking",
    "rebased {branch} on main",
    "the flaky test in {service} failed again",
    "{person} can you pair with me on {ticket} after lunch?",
    "restarted the {service} pods, looks stable",
    "updated the dashboard for {service}",
    "I'll take {ticket}",
    "{ticket} is blocked on the {service} team",
    "disk usage on {host} is at {pct}%",
    "anyone seen this {bug} before? {service} logs are full of it",
    "the {service} migration is done",
    "closing {ticket}, fixed in {version}",
    "running the load test against {service} now",
    "moving {ticket} to next sprint",
    "I'm out {weekday} afternoon, {person} covers {service}",
    "sprint planning is at {hour} in the big room",
    "bumping {service} to {version}",
    "the {service} alert fired again, false positive I think",
    "where do we keep the {service} credentials config?",
    "draft PR for {ticket} is up, early feedback welcome",
)
BOT_LINES = (
    ("ci-bot", "Build #{n} {result} on {branch}"),
    ("deploy-bot", "Deployed {service} {version} to {env}"),
    ("ci-bot", "Nightly tests {result}: {n} passed, {m} skipped"),
    ("alert-bot", "[{sev}] {service} p99 latency above {ms} ms"),
)
GITHUB = (
    "[github] {person} opened pull request #{pr}: {title}",
    "[github] PR #{pr} merged by {person}",
    "[github] {person} requested your review on #{pr}",
)
SLOTS: dict[str, tuple[str, ...]] = {
    "food": ("pizza", "sushi", "burritos", "ramen", "falafel", "pancakes", "the canteen", "bitterballen"),
    "hour": ("12:00", "12:30", "13:00", "15:00", "16:30", "11:00", "14:15"),
    "floor": ("2", "3", "4", "5"),
    "show": ("the match", "the new season", "the debate", "that documentary", "the final", "the cooking show"),
    "weather": ("raining", "sunny", "foggy", "windy", "freezing", "hailing"),
    "snack": ("stroopwafel", "cookie", "croissant", "apple", "cake", "chocolate"),
    "line": ("8:12", "Utrecht", "Haarlem", "Leiden", "Amersfoort", "17:40"),
    "gadget": ("keyboard", "monitor", "headset", "chair", "mouse", "webcam", "laptop stand"),
    "event": ("hackathon", "pub quiz", "offsite", "running club", "conference", "board game night"),
    "emoji": ("typo", "spam", "gibberish", "noise"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "thing2": ("role", "baby", "house", "bike", "certification"),
    "service": (
        "billing-api",
        "auth-service",
        "checkout",
        "search",
        "notifications",
        "gateway",
        "ledger",
        "reporting",
        "scheduler",
        "inventory",
        "payments",
        "warehouse-sync",
    ),  # fmt: skip
    "branch": ("main", "release-1.9", "feature/cart", "fix/login", "hotfix/ledger", "develop"),
    "bug": ("timeout", "null pointer", "race condition", "memory leak", "off-by-one", "encoding issue", "deadlock"),
    "host": ("db-01", "db-02", "worker-3", "cache-1", "build-agent-2", "kafka-4"),
    "env": ("staging", "production", "canary", "sandbox"),
    "result": ("passed", "failed", "passed", "passed"),
    "sev": ("warn", "crit", "info"),
    "title": ("Fix login redirect", "Add ledger export", "Bump deps", "Refactor cart", "Cache search results"),
}


# -- generation ----------------------------------------------------------------------------------


@dataclass
class Row:
    ts: datetime
    channel: str
    author: str
    provenance: str
    text: str
    label: str  # "habit:<key>", "draft:<n>", "fact:<n>", "github", "noise:<kind>"


@dataclass
class Planted:
    habit: str
    day: int
    minute: int  # minute of the day (local)
    author: str
    channel: str
    text: str


@dataclass
class Generated:
    episodes: list[dict[str, Any]] = field(default_factory=list)
    gold: dict[str, Any] = field(default_factory=dict)

    def days(self) -> list[list[dict[str, Any]]]:
        """Episodes grouped by day index (each day in time order)."""
        out: list[list[dict[str, Any]]] = [[] for _ in range(int(self.gold["days"]))]
        for e in self.episodes:
            out[int(e["id"].split("-")[1][1:])].append(e)
        return out


def generate(
    *,
    seed: int = 7,
    people: int = 12,
    channels: int = 6,
    days: int = 30,
    per_day: int = 2000,
    start: date = date(2026, 10, 12),
    team: str = TEAM,
) -> Generated:
    """The whole period in memory: episodes (dicts in the ingest format) and the gold labels."""
    if days < 4:
        raise ValueError("days must be at least 4 (habits are stated on different days)")
    if people < 4:
        raise ValueError("people must be at least 4 (habits are stated by different people)")
    rnd = random.Random(seed)
    folks = _people(people)
    chans = _channels(channels)
    planted = _plant(rnd, folks, chans, days)
    by_day: dict[int, list[Planted]] = {}
    for p in planted:
        by_day.setdefault(p.day, []).append(p)

    episodes: list[dict[str, Any]] = []
    labels: dict[str, str] = {}
    for d in range(days):
        day0 = datetime(start.year, start.month, start.day, tzinfo=TZ) + timedelta(days=d)
        rows = [
            Row(_at(day0, p.minute, rnd), p.channel, p.author, "human", p.text, f"habit:{p.habit}")
            for p in by_day.get(d, [])
        ]
        if d == 0:
            for i, (author, ch, text) in enumerate(FACT_DECLARATIONS):
                rows.append(Row(_at(day0, 9 * 60 + 2 * i, rnd), _chan(ch, chans), author, "human", text, f"fact:{i}"))
        drafts = max(1, per_day // 100)
        for _ in range(drafts):
            i = rnd.randrange(len(AI_DRAFTS))
            rows.append(Row(_at(day0, _minute(rnd), rnd), _chan("dev", chans), BOT, "ai-draft", AI_DRAFTS[i], "draft"))
        while len(rows) < per_day:
            rows.append(_noise(rnd, day0, folks, chans))
        rows.sort(key=lambda r: (r.ts, r.channel, r.author, r.text))
        for n, r in enumerate(rows):
            eid = f"syn-d{d:02d}-{n:05d}"
            labels[eid] = r.label
            episodes.append(
                {
                    "id": eid,
                    "team": team,
                    "channel": r.channel,
                    "author": r.author,
                    "text": r.text,
                    "ts": r.ts.isoformat(timespec="seconds"),
                    "provenance": r.provenance,
                }
            )
    gold = _gold(seed, team, start, days, per_day, folks, chans, episodes, labels)
    return Generated(episodes, gold)


def _people(n: int) -> list[str]:
    return PEOPLE[:n] if n <= len(PEOPLE) else PEOPLE + [f"person{i:02d}" for i in range(len(PEOPLE), n)]


def _channels(n: int) -> list[str]:
    return CHANNELS[:n] if n <= len(CHANNELS) else CHANNELS + [f"chan{i:02d}" for i in range(len(CHANNELS), n)]


_STAND_IN = {"infra": "ops", "security": "ops", "data": "dev", "design": "dev", "support": "ops", "releases": "ops"}


def _chan(wanted: str, chans: list[str]) -> str:
    """A habit's home channel when the team has it, else a stand-in (infra -> ops, data -> dev, …)."""
    if wanted in chans:
        return wanted
    alt = _STAND_IN.get(wanted)
    return alt if alt in chans else chans[sum(map(ord, wanted)) % len(chans)]


def _minute(rnd: random.Random) -> int:
    """Minute of the working day: most chat between 08:30 and 18:30, a little early and late."""
    if rnd.random() < 0.06:
        return rnd.randint(7 * 60, 22 * 60 + 30)
    peak = rnd.choice((10 * 60 + 30, 14 * 60 + 30, 16 * 60))
    return max(8 * 60, min(19 * 60, int(rnd.gauss(peak, 75))))


def _at(day0: datetime, minute: int, rnd: random.Random) -> datetime:
    # Wall-clock time on that local day (zoneinfo gives the right offset on both sides of DST).
    return day0.replace(hour=minute // 60, minute=minute % 60, second=rnd.randint(0, 59))


def _fill(rnd: random.Random, template: str, folks: list[str]) -> str:
    values = {k: rnd.choice(v) for k, v in SLOTS.items()}
    values.update(
        person=rnd.choice(folks),
        ticket=f"{rnd.choice(('PLAT', 'OPS', 'BILL', 'SUP'))}-{rnd.randint(100, 2999)}",
        pr=str(rnd.randint(300, 4999)),
        version=f"{rnd.randint(1, 4)}.{rnd.randint(0, 19)}.{rnd.randint(0, 9)}",
        pct=str(rnd.randint(70, 97)),
        n=str(rnd.randint(1000, 99999)),
        m=str(rnd.randint(0, 40)),
        ms=str(rnd.choice((250, 500, 800, 1200))),
    )
    return template.format(**values)


def _noise(rnd: random.Random, day0: datetime, folks: list[str], chans: list[str]) -> Row:
    at = _at(day0, _minute(rnd), rnd)
    x = rnd.random()
    person = rnd.choice(folks)
    if x < 0.36:
        return Row(at, rnd.choice(chans), person, "human", rnd.choice(ACKS), "noise:ack")
    if x < 0.42:
        return Row(at, rnd.choice(chans), person, "human", rnd.choice(GREETINGS), "noise:greeting")
    if x < 0.58:
        text = _fill(rnd, rnd.choice(OFFTOPIC), folks)
        return Row(at, _chan("random", chans), person, "human", text, "noise:offtopic")
    if x < 0.93:
        text = _fill(rnd, rnd.choice(WORK), folks)
        return Row(at, rnd.choice(chans), person, "human", text, "noise:work")
    if x < 0.985:
        bot, template = rnd.choice(BOT_LINES)
        return Row(at, _chan("releases", chans), bot, "bot", _fill(rnd, template, folks), "noise:bot")
    text = _fill(rnd, rnd.choice(GITHUB), folks)
    return Row(at, _chan("dev", chans), "github", "bot", text, "github")


def _plant(rnd: random.Random, folks: list[str], chans: list[str], days: int) -> list[Planted]:
    out: list[Planted] = []
    # Regular habits: spread over the whole period except the last day (kept for the watchdog).
    span = days - 1
    for h in HABITS:
        out += _statements(rnd, h, folks, chans, first=rnd.randrange(0, max(1, span // 3)), last=max(0, span - 1))
    for c in CHANGES:
        day = max(1, min(span - 1, round(span * c.day_fraction)))
        out += _statements(rnd, c.old, folks, chans, first=0, last=day - 1)
        out += _statements(rnd, c.new, folks, chans, first=day, last=min(span - 1, day + 5), first_day_exact=True)
    for h in TAUGHT_LAST_DAY:
        out += _statements(rnd, h, folks, chans, first=days - 1, last=days - 1, burst_minute=rnd.randint(600, 700))
    return out


def _statements(
    rnd: random.Random,
    h: HabitSpec,
    folks: list[str],
    chans: list[str],
    *,
    first: int,
    last: int,
    first_day_exact: bool = False,
    burst_minute: int | None = None,
) -> list[Planted]:
    """``h.statements`` statements of ``h``: different people, different templates, different days.

    A habit is discussed before it is just restated: its first three statements fall on three
    different days within five days of ``first`` (or, when taught, within ~70 minutes of one day,
    the two after the first echoing it); the rest are spread over the days after that up to ``last``.
    """
    n = max(3, h.statements)
    authors = rnd.sample(folks, k=min(n, len(folks)))
    while len(authors) < n:
        authors.append(rnd.choice(folks))
    templates = list(h.templates)
    rnd.shuffle(templates)
    channel = _chan(h.channel, chans)
    out: list[Planted] = []
    texts: list[str] = []
    if burst_minute is not None or h.burst:
        m0 = burst_minute if burst_minute is not None else rnd.randint(9 * 60 + 30, 15 * 60)
        for i in range(3):
            out.append(Planted(h.key, first, m0 + i * rnd.randint(15, 35), authors[i], channel, ""))
        texts = [templates[0], *(h.echoes or templates[1:3])[:2]]
        later = list(range(first + 1, last + 1))
    else:
        early = list(range(first, min(last, first + 4) + 1))
        days = sorted(rnd.sample(early, k=min(3, len(early))))
        if first_day_exact and first not in days:
            days = [first, *days[1:]]
        while len(days) < 3:
            days.append(rnd.choice(early))
        out += [Planted(h.key, d, _minute(rnd), authors[i], channel, "") for i, d in enumerate(sorted(days))]
        later = list(range(max(days) + 1, last + 1))
    rest = n - len(out)
    if rest > 0 and later:
        picked = sorted(rnd.sample(later, k=min(rest, len(later))))
        base = len(out)
        out += [Planted(h.key, d, _minute(rnd), authors[base + i], channel, "") for i, d in enumerate(picked)]
    used = set(texts)
    pool = [t for t in templates if t not in used] or templates
    texts += [pool[i % len(pool)] for i in range(len(out) - len(texts))]
    for p, tpl in zip(out, texts, strict=True):
        closer = rnd.choice(CLOSERS)
        opener = "" if tpl in h.echoes else rnd.choice(OPENERS)
        text = tpl.format(o=opener, c="" if "please" in closer and "please" in tpl else closer)
        p.text = text[0].upper() + text[1:]
    return out


def _gold(
    seed: int,
    team: str,
    start: date,
    days: int,
    per_day: int,
    folks: list[str],
    chans: list[str],
    episodes: list[dict[str, Any]],
    labels: dict[str, str],
) -> dict[str, Any]:
    day_of = {e["id"]: int(e["id"].split("-")[1][1:]) for e in episodes}
    author_of = {e["id"]: e["author"] for e in episodes}
    specs = {h.key: h for h in HABITS} | {h.key: h for h in TAUGHT_LAST_DAY}
    for c in CHANGES:
        specs[c.old.key] = c.old
        specs[c.new.key] = c.new
    habits = []
    for key, spec in specs.items():
        ids = sorted(i for i, lab in labels.items() if lab == f"habit:{key}")
        habits.append(
            {
                "key": key,
                "statement": spec.canonical,
                "episodes": ids,
                "days": sorted({day_of[i] for i in ids}),
                "authors": sorted({author_of[i] for i in ids}),
                "taught_in_burst": spec.burst or spec in TAUGHT_LAST_DAY,
            }
        )
    changes = []
    for c in CHANGES:
        new_ids = [i for i, lab in labels.items() if lab == f"habit:{c.new.key}"]
        changes.append({"key": c.key, "old": c.old.key, "new": c.new.key, "day": min(day_of[i] for i in new_ids)})
    counts: dict[str, int] = {}
    for lab in labels.values():
        kind = lab.split(":")[0] if not lab.startswith("noise:") else lab
        counts[kind] = counts.get(kind, 0) + 1
    return {
        "seed": seed,
        "team": team,
        "start": start.isoformat(),
        "days": days,
        "per_day": per_day,
        "people": folks,
        "channels": chans,
        "habits": sorted(habits, key=lambda h: h["key"]),
        "changes": changes,
        "pinned_facts": list(PINNED_FACTS),
        "ai_drafts": sorted(i for i, lab in labels.items() if lab == "draft"),
        "skipped_by_write_discipline": sorted(i for i, lab in labels.items() if lab == "github"),
        "fact_declarations": sorted(i for i, lab in labels.items() if lab.startswith("fact:")),
        "counts": dict(sorted(counts.items())),
        "episodes": len(episodes),
        "episodes_per_day": [sum(1 for i in day_of.values() if i == d) for d in range(days)],
    }


def write(gen: Generated, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    eps, gold = out / "episodes.jsonl", out / "gold.json"
    with eps.open("w", encoding="utf-8") as f:
        for e in gen.episodes:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    gold.write_text(json.dumps(gen.gold, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return eps, gold


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, required=True, help="directory for episodes.jsonl and gold.json")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--people", type=int, default=12)
    ap.add_argument("--channels", type=int, default=6)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=2000)
    ap.add_argument("--start", type=date.fromisoformat, default=date(2026, 10, 12))
    a = ap.parse_args(argv)
    gen = generate(seed=a.seed, people=a.people, channels=a.channels, days=a.days, per_day=a.per_day, start=a.start)
    eps, gold = write(gen, a.out)
    c = gen.gold["counts"]
    print(
        f"wrote {len(gen.episodes)} episodes ({a.days} days) to {eps} and the labels to {gold}: "
        f"{len(gen.gold['habits'])} habits ({c.get('habit', 0)} statements), {len(gen.gold['changes'])} changes, "
        f"{c.get('draft', 0)} ai-drafts, {sum(v for k, v in c.items() if k.startswith('noise:'))} noise"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
