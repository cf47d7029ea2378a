"""A budgeted, time-boxed night: what distill's questions will cost, and whether the next batch may go.

The estimate mirrors how ``LiteLLMProvider.distill_many`` asks: a group with fewer distinct messages
than ``min_support`` is not asked, the rest go ``llm.batch_groups`` to a call. Prompt tokens are the
characters of the messages the client would send divided by four (the chars/4 rule: no tokenizer is
loaded for an estimate); completion tokens are the call's ``max_tokens`` bound, so the estimate is an
upper bound. Cost comes from litellm's price map when the model has a price, else it is unknown.

The gate is asked before each batch of questions: past the window's end, or when the batch would take
the night's or the team's calls or tokens over ``llm.night_budget``, the batch and everything after it
is not asked (its groups stay pending). What was spent is what the provider counted; a provider that
counts no calls (the offline one) is charged its estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from taskzilla_sleep.llm.base import DistillRequest, LLMUsage
from taskzilla_sleep.llm.prompts.distill import distill_max_tokens, distill_messages
from taskzilla_sleep.models import Run
from taskzilla_sleep.settings import NightBudget

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Estimate:
    groups: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0  # the max_tokens bound of each call
    cost_usd: float | None = None  # None: the model has no price (or there is no model)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def counts(self) -> dict[str, int]:
        """For the ledger's step counts (the cost goes to its own field: counts are whole numbers)."""
        return {
            "estimate_groups": self.groups,
            "estimate_calls": self.calls,
            "estimate_prompt_tokens": self.prompt_tokens,
            "estimate_completion_tokens": self.completion_tokens,
        }

    def line(self) -> str:
        cost = "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        return (
            f"estimate: {self.groups} group(s), {self.calls} call(s), ~{self.prompt_tokens} prompt tokens "
            f"+ ≤{self.completion_tokens} completion tokens, cost {cost}"
        )


def batches(requests: Sequence[DistillRequest], batch_groups: int) -> list[list[int]]:
    """Indexes of ``requests`` per call, as the client batches them (too-small groups are not asked)."""
    asked = [i for i, r in enumerate(requests) if len({e.id for e in r.episodes}) >= r.min_support]
    return [asked[k : k + batch_groups] for k in range(0, len(asked), batch_groups)]


def estimate_batch(batch: Sequence[DistillRequest]) -> Estimate:
    """One call's estimate (an empty batch costs nothing)."""
    if not batch:
        return Estimate()
    chars = sum(len(m["content"] or "") for m in distill_messages(batch))
    return Estimate(len(batch), 1, math.ceil(chars / CHARS_PER_TOKEN), distill_max_tokens(batch))


def estimate(requests: Sequence[DistillRequest], batch_groups: int, model: str | None) -> Estimate:
    """What asking every one of ``requests`` would take (``model``: priced through litellm's map)."""
    parts = [estimate_batch([requests[i] for i in b]) for b in batches(requests, batch_groups)]
    total = Estimate(
        groups=len(requests),
        calls=sum(p.calls for p in parts),
        prompt_tokens=sum(p.prompt_tokens for p in parts),
        completion_tokens=sum(p.completion_tokens for p in parts),
    )
    return Estimate(**{**total.__dict__, "cost_usd": price(model, total.prompt_tokens, total.completion_tokens)})


def price(model: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    if not model:
        return None
    if not (prompt_tokens or completion_tokens):
        return 0.0
    from taskzilla_sleep.llm.client import _import_litellm  # ~3 s: only when a hosted model is priced

    litellm = _import_litellm()
    try:
        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # a model missing from the price map: unknown, not an error
        return None
    return round(float(p) + float(c), 6)


Reason = str  # "budget: calls" | "budget: tokens" | "window"


@dataclass(frozen=True)
class Deferral:
    """Groups of one team a step did not ask about, and why: they stay pending for the next night."""

    team: str
    groups: int
    reason: Reason

    def line(self) -> str:
        return f"{self.team}: {self.groups} group(s) deferred ({self.reason}), taken first next night"


class Gate:
    """The night's allowance: its budget, its spending so far, and the window's end."""

    def __init__(
        self, budget: NightBudget, usage: LLMUsage, clock: Callable[[], datetime], deadline: datetime | None
    ) -> None:
        self.budget, self.usage, self.clock, self.deadline = budget, usage, clock, deadline
        self.night = [0, 0]  # calls, tokens spent by this night's distills
        self.team: dict[str, list[int]] = {}

    @property
    def limited(self) -> bool:
        """False when nothing can stop a distill (no budget, no deadline): it asks in one go, as before."""
        b = self.budget
        return self.deadline is not None or any(x is not None for x in (b.calls, b.tokens, b.team_calls, b.team_tokens))

    def past_deadline(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def admit(self, team: str, nxt: Sequence[Estimate]) -> tuple[int, Reason | None]:
        """How many of the batches ``nxt`` may be asked now, and why not all (None: all may)."""
        if self.past_deadline():
            return 0, "window"
        b = self.budget
        calls, tokens = self.night
        tcalls, ttokens = self.team.setdefault(team, [0, 0])
        for n, e in enumerate(nxt):
            calls, tokens, tcalls, ttokens = calls + e.calls, tokens + e.tokens, tcalls + e.calls, ttokens + e.tokens
            if _over(calls, b.calls) or _over(tcalls, b.team_calls):
                return n, "budget: calls"
            if _over(tokens, b.tokens) or _over(ttokens, b.team_tokens):
                return n, "budget: tokens"
        return len(nxt), None

    def seed(self, runs: Sequence[Run], team: str) -> None:
        """Count what a scheduled night's earlier team jobs (``runs``, of its slot) spent on distill: the
        night's budget is the night's, not each job's (jobs running at once do not see each other's)."""
        for run in runs:
            for s in run.steps:
                if run.dry_run or s.step != "distill":
                    continue
                spent = (s.llm_calls, s.prompt_tokens + s.completion_tokens)
                for acc in [self.night] + ([self.team.setdefault(team, [0, 0])] if run.team == team else []):
                    acc[0] += spent[0]
                    acc[1] += spent[1]

    def snapshot(self) -> tuple[int, int]:
        u = self.usage
        return u.calls, u.prompt_tokens + u.completion_tokens

    def charge(self, team: str, before: tuple[int, int], asked: Sequence[Estimate]) -> None:
        """After a batch round: what the provider counted, or the estimate when it counts nothing."""
        calls, tokens = self.snapshot()
        spent = (calls - before[0], tokens - before[1])
        if spent[0] == 0:
            spent = (sum(e.calls for e in asked), sum(e.tokens for e in asked))
        t = self.team.setdefault(team, [0, 0])
        for acc in (self.night, t):
            acc[0] += spent[0]
            acc[1] += spent[1]


def _over(spent: int, limit: int | None) -> bool:
    return limit is not None and spent > limit
