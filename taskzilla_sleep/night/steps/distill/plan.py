"""What a distill decided: the pattern changes, the episodes' marks, its counts; and its journal form."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from taskzilla_sleep.core.models import Pattern, from_ms
from taskzilla_sleep.core.text import one_line
from taskzilla_sleep.night.budget import Deferral, Estimate
from taskzilla_sleep.night.steps.base import PlanBase
from taskzilla_sleep.stores.ports import EpisodeUpdate

ChangeAction = Literal["add", "bump", "rescore"]


@dataclass
class PatternChange:
    pattern: Pattern
    action: ChangeAction
    subject_keys: list[str]
    absorb: list[str]  # episode ids to absorb into this pattern
    unabsorb: list[str]  # episode ids to give back (pattern fell below the floor)
    before: Pattern | None = None
    # A digest of the pattern as the plan read it (None: a new pattern). Finishing a journal after a
    # crash applies a change only to a pattern still in that state: one the first attempt already
    # wrote is left as it is, and so is one somebody else changed since (a person's resolution).
    before_digest: str | None = None


@dataclass
class DistillCounts:
    """What the step saw and refused, besides its changes (the night's report shows them)."""

    episodes_read: int = 0
    new_episodes: int = 0
    groups: int = 0
    skipped_groups: int = 0  # asked, no usable answer
    retry_groups: int = 0  # ... whose new episodes stay pending for the next night
    given_up_groups: int = 0  # ... on distill.max_attempts distinct nights: given up (reported)
    pinned_matches: int = 0
    non_beliefs: int = 0  # answers whose statement is only questions (any language): not written
    injections_blocked: int = 0  # answers whose statement reads as an order to the assistant / asks for secrets
    support_dropped: int = 0  # supporting ids that disagree with the statement on a slot
    too_little_support: int = 0  # answers left with fewer than distill.min_episodes supporting episodes
    not_absorbed: int = 0  # evidence of an active pattern kept raw: it does not state the pattern closely
    declined_groups: int = 0  # asked, the model found no belief in them (remembered on their episodes)
    declines_remembered: int = 0  # not asked: declined before, and too little has joined them since
    deferred_groups: int = 0  # not asked: the night's budget or window ran out (pending for the next night)
    withheld: int = 0  # not shown to the judge: drafts, bots, chatter, only questions, injections (prefilter)
    shown: int = 0  # messages shown to the judge, in the topics asked
    unread: int = 0  # ... in a language the judge does not read (the offline rules: English only)
    too_few_people: int = 0  # answers by fewer than distill.min_authors people on fewer than min_days days
    catch_all: int = 0  # answers whose support says several things (cohesion below distill.min_cohesion)


@dataclass
class DistillPlan(PlanBase):
    team: str
    now: datetime
    lookback: timedelta | None = None  # a watchdog distill: this window only, the night's marks untouched
    changes: list[PatternChange] = field(default_factory=list)
    # What the night took into account, and the declines it remembers (nightly only).
    marks: list[EpisodeUpdate] = field(default_factory=list)
    seen: DistillCounts = field(default_factory=DistillCounts)
    failure: str | None = None  # no question got a usable answer: the step fails after applying
    resumed: bool = False  # finished from the journal of an interrupted run
    deferred_reason: str | None = None  # why seen.deferred_groups were not asked
    estimate: Estimate = field(default_factory=Estimate)  # the pre-flight estimate of what was pending

    def lines(self) -> list[str]:
        out = []
        for c in self.changes:
            out.append(_change_line(c))
            if c.absorb:
                more = " …" if len(c.absorb) > 6 else ""
                out.append(f"    absorb {len(c.absorb)} episodes: {', '.join(c.absorb[:6])}{more}")
            if c.unabsorb:
                out.append(f"    un-absorb {len(c.unabsorb)} episodes (below the floor)")
        if self.seen.retry_groups:
            out.append(f"? {self.seen.retry_groups} group(s) got no usable answer: asked again next night")
        if self.seen.given_up_groups:
            out.append(
                f"! {self.seen.given_up_groups} group(s) got no usable answer on distill.max_attempts nights: "
                f"given up (`taskzilla-sleep distill retry --team {self.team}` asks again)"
            )
        if self.estimate.groups:
            out.append(f"= {self.team} {self.estimate.line()}")
        left = self.deferral()
        if left is not None:
            out.append(f"> {left.line()}")
        return out

    def deferral(self) -> Deferral | None:
        if not self.seen.deferred_groups:
            return None
        return Deferral(self.team, self.seen.deferred_groups, self.deferred_reason or "budget")

    def estimate_cost(self) -> float | None:
        return self.estimate.cost_usd

    def counts(self) -> dict[str, int]:
        s = self.seen
        return {
            "episodes_read": s.episodes_read,
            "new_episodes": s.new_episodes,
            "groups": s.groups,
            "patterns_added": sum(c.action == "add" for c in self.changes),
            "evidence_bumps": sum(c.action == "bump" for c in self.changes),
            "rescored": sum(c.action == "rescore" for c in self.changes),
            "absorbed": sum(len(c.absorb) for c in self.changes),
            "unabsorbed": sum(len(c.unabsorb) for c in self.changes),
            "skipped_groups": s.skipped_groups,
            "retry_groups": s.retry_groups,
            "given_up_groups": s.given_up_groups,
            "pinned_matches": s.pinned_matches,
            "non_beliefs": s.non_beliefs,
            "injections_blocked": s.injections_blocked,
            "support_dropped": s.support_dropped,
            "too_little_support": s.too_little_support,
            "not_absorbed": s.not_absorbed,
            "declined_groups": s.declined_groups,
            "declines_remembered": s.declines_remembered,
            "deferred_groups": s.deferred_groups,
            "withheld": s.withheld,
            "shown": s.shown,
            "unread": s.unread,
            "too_few_people": s.too_few_people,
            "catch_all": s.catch_all,
            **self.estimate.counts(),
        }

    def empty(self) -> bool:
        return not (self.changes or self.marks)

    def written_patterns(self) -> list[Pattern]:
        return [c.pattern for c in self.changes]

    def pattern_lags(self) -> list[float]:
        return [
            c.pattern.availability_lag_s
            for c in self.changes
            if c.action == "add" and c.pattern.availability_lag_s is not None
        ]


def _change_line(c: PatternChange) -> str:
    p, b = c.pattern, c.before
    if c.action == "add":
        return (
            f"+ pattern {p.id} [{p.status.value} {p.confidence:.2f}, {p.support_count} episodes] "
            f"{one_line(p.statement)}"
        )
    if c.action == "bump":
        was = f"{b.support_count}→{p.support_count} episodes, {b.confidence:.2f}→{p.confidence:.2f}" if b else ""
        return f"~ evidence bump {p.id} ({was}) {one_line(p.statement)}"
    return (
        f"~ rescore {p.id} {b.status.value if b else '?'}→{p.status.value} "
        f"{(b.confidence if b else 0):.2f}→{p.confidence:.2f} {one_line(p.statement)}"
    )


def digest(p: Pattern) -> str:
    return hashlib.sha256(json.dumps(p.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


# -- the journal: the plan as written to the graph before it is applied ------------------------------


def to_journal(plan: DistillPlan) -> dict[str, Any]:
    return {
        "team": plan.team,
        "now": plan.now.isoformat(),
        "lookback_s": plan.lookback.total_seconds() if plan.lookback is not None else None,
        "changes": [
            {
                "pattern": c.pattern.model_dump(mode="json"),
                "action": c.action,
                "subject_keys": c.subject_keys,
                "absorb": c.absorb,
                "unabsorb": c.unabsorb,
                "before_digest": c.before_digest,
            }
            for c in plan.changes
        ],
        "marks": [m.model_dump(mode="json", exclude_unset=True) for m in plan.marks],
        "counts": plan.counts(),
        "failure": plan.failure,
        "deferred_reason": plan.deferred_reason,
    }


def from_journal(d: dict[str, Any]) -> DistillPlan:
    counts = d.get("counts", {})
    return DistillPlan(
        team=d["team"],
        now=datetime.fromisoformat(d["now"]),
        lookback=timedelta(seconds=d["lookback_s"]) if d.get("lookback_s") is not None else None,
        changes=[
            PatternChange(
                Pattern.model_validate(c["pattern"]),
                c["action"],
                list(c["subject_keys"]),
                list(c["absorb"]),
                list(c["unabsorb"]),
                before_digest=c.get("before_digest"),
            )
            for c in d["changes"]
        ],
        marks=[_mark(m) for m in d["marks"]],
        seen=DistillCounts(**{f.name: int(counts.get(f.name, 0)) for f in fields(DistillCounts)}),
        failure=d.get("failure"),
        deferred_reason=d.get("deferred_reason"),
        resumed=True,
    )


def _mark(m: dict[str, Any]) -> EpisodeUpdate:
    """A journaled mark; journals written before marks were typed hold ``{"id", "set": {... ms}}``."""
    if "set" not in m:
        return EpisodeUpdate.model_validate(m)
    changes = {k: from_ms(int(v)) if k.endswith("_at") and v is not None else v for k, v in m["set"].items()}
    return EpisodeUpdate.model_validate({"id": m["id"], **changes})
