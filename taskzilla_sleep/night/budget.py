"""A budgeted, time-boxed night: what distill's and reflect's questions will cost, and whether the next batch may go.

The estimate mirrors how ``LiteLLMProvider.distill_many`` asks: a group with fewer distinct messages
than ``min_support`` is not asked, the rest go ``llm.batch_groups`` to a call. Prompt tokens are the
characters of the messages the client would send divided by four (the chars/4 rule: no tokenizer is
loaded for an estimate); completion tokens are the call's ``max_tokens`` bound, so the estimate is an
upper bound. Cost comes from litellm's price map when the model has a price, else it is unknown.

The gate is asked before each batch of questions: past the window's end, or when the batch would take
the night's or the team's calls or tokens over ``llm.night_budget``, the batch and everything after it
is not asked (its groups stay pending). What was spent is what the provider counted for the calls
asked through the gate (a usage scope: not what concurrent jobs asked meanwhile); a provider that
counts no calls (the offline one) is charged its estimate. Reflect asks the same way, one call per new
belief and up to ``MAX_CANDIDATES`` of its old ones (as ``LiteLLMProvider.classify_many`` batches).

A night's team jobs share its allowance: in one process through a :class:`Tally` (the worker keeps one
per scheduled night; an admitted batch reserves its estimate at once, so jobs running at the same time
cannot each spend the whole budget); across replicas only through the ledger, read as each job starts
(a replica does not see what another spends meanwhile: the night may go over by what the replicas'
jobs running at once admitted in between).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from taskzilla_sleep.core.models import Run
from taskzilla_sleep.core.settings import NightBudget
from taskzilla_sleep.llm.base import DistillRequest, LLMUsage, ReflectRequest, usage_scope
from taskzilla_sleep.llm.prompts.distill import distill_batches, distill_max_tokens, distill_messages
from taskzilla_sleep.llm.prompts.reflect import MAX_CANDIDATES, reflect_max_tokens, reflect_messages

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
    return distill_batches(requests, batch_groups)


def estimate_batch(batch: Sequence[DistillRequest]) -> Estimate:
    """One call's estimate (an empty batch costs nothing)."""
    if not batch:
        return Estimate()
    chars = sum(len(m["content"] or "") for m in distill_messages(batch))
    return Estimate(len(batch), 1, math.ceil(chars / CHARS_PER_TOKEN), distill_max_tokens(batch))


def estimate(requests: Sequence[DistillRequest], batch_groups: int, model: str | None) -> Estimate:
    """What asking every one of ``requests`` would take (``model``: priced through litellm's map)."""
    parts = [estimate_batch([requests[i] for i in b]) for b in batches(requests, batch_groups)]
    return total(len(requests), parts, model)


def total(groups: int, parts: Sequence[Estimate], model: str | None) -> Estimate:
    prompt, completion = sum(p.prompt_tokens for p in parts), sum(p.completion_tokens for p in parts)
    calls = sum(p.calls for p in parts)
    return Estimate(groups, calls, prompt, completion, price(model, prompt, completion))


def reflect_batches(requests: Sequence[ReflectRequest]) -> list[list[int]]:
    """Indexes of ``requests`` per call, as the client batches them: one new belief and up to
    ``MAX_CANDIDATES`` of its old ones, new beliefs in the order they first appear."""
    by_new: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        by_new.setdefault(r.new.id, []).append(i)
    return [ix[k : k + MAX_CANDIDATES] for ix in by_new.values() for k in range(0, len(ix), MAX_CANDIDATES)]


def estimate_reflect_batch(batch: Sequence[ReflectRequest]) -> Estimate:
    """One reflect call's estimate (``groups``: the comparisons it asks)."""
    if not batch:
        return Estimate()
    chars = sum(len(m["content"] or "") for m in reflect_messages(batch))
    return Estimate(len(batch), 1, math.ceil(chars / CHARS_PER_TOKEN), reflect_max_tokens(batch))


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
    groups: int  # distill's groups, or reflect's comparisons (see ``unit``)
    reason: Reason
    unit: str = "group"

    def line(self) -> str:
        return f"{self.team}: {self.groups} {self.unit}(s) deferred ({self.reason}), taken first next night"


Spent = tuple[int, int]  # calls, tokens


class Tally:
    """What one scheduled night's jobs in this process spent and reserved, by (run, team); shared by
    the jobs running at once (thread-safe). A job's own gate keeps a private one."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._runs: set[str] = set()
        self._spent: dict[tuple[str, str], list[int]] = {}

    def join(self, run_id: str) -> None:
        with self.lock:
            self._runs.add(run_id)

    def knows(self, run_id: str) -> bool:
        with self.lock:
            return run_id in self._runs

    def add(self, run_id: str, team: str, calls: int, tokens: int) -> None:
        with self.lock:
            acc = self._spent.setdefault((run_id, team), [0, 0])
            acc[0] += calls
            acc[1] += tokens

    def spent(self, team: str) -> tuple[Spent, Spent]:
        """The night's and ``team``'s spending (and reservations) by this process's jobs."""
        with self.lock:
            night = [sum(v[k] for v in self._spent.values()) for k in (0, 1)]
            mine = [sum(v[k] for (_, t), v in self._spent.items() if t == team) for k in (0, 1)]
        return (night[0], night[1]), (mine[0], mine[1])


class Gate:
    """The night's allowance: its budget, its spending so far, and the window's end."""

    def __init__(
        self,
        budget: NightBudget,
        usage: LLMUsage,
        clock: Callable[[], datetime],
        deadline: datetime | None,
        tally: Tally | None = None,
        run_id: str = "",
    ) -> None:
        self.budget, self.usage, self.clock, self.deadline = budget, usage, clock, deadline
        self.tally, self.run_id = tally if tally is not None else Tally(), run_id
        self.tally.join(run_id)
        self.ledger = [0, 0]  # calls, tokens the ledger says the night's other jobs spent (not this process's)
        self.ledger_team: dict[str, list[int]] = {}

    @property
    def limited(self) -> bool:
        """False when nothing can stop a judging step (no budget, no deadline): it asks in one go, as before."""
        b = self.budget
        return self.deadline is not None or any(x is not None for x in (b.calls, b.tokens, b.team_calls, b.team_tokens))

    def past_deadline(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def spent(self, team: str) -> tuple[Spent, Spent]:
        """The night's and ``team``'s spending so far: the ledger's, and this process's jobs' (live)."""
        (nc, nt), (tc, tt) = self.tally.spent(team)
        lt = self.ledger_team.get(team, [0, 0])
        return (self.ledger[0] + nc, self.ledger[1] + nt), (lt[0] + tc, lt[1] + tt)

    def admit(self, team: str, nxt: Sequence[Estimate]) -> tuple[int, Reason | None]:
        """How many of the batches ``nxt`` may be asked now, and why not all (None: all may). What is
        admitted is reserved at once (its estimate), until :meth:`asking` charges what it took."""
        if self.past_deadline():
            return 0, "window"
        b = self.budget
        with self.tally.lock:
            (calls, tokens), (tcalls, ttokens) = self.spent(team)
            n, reason = len(nxt), None
            for k, e in enumerate(nxt):
                calls, tcalls = calls + e.calls, tcalls + e.calls
                tokens, ttokens = tokens + e.tokens, ttokens + e.tokens
                if _over(calls, b.calls) or _over(tcalls, b.team_calls):
                    n, reason = k, "budget: calls"
                    break
                if _over(tokens, b.tokens) or _over(ttokens, b.team_tokens):
                    n, reason = k, "budget: tokens"
                    break
            self.tally.add(self.run_id, team, sum(e.calls for e in nxt[:n]), sum(e.tokens for e in nxt[:n]))
        return n, reason

    def seed(self, runs: Sequence[Run], team: str) -> None:
        """Count what a scheduled night's earlier team jobs (``runs``, of its slot) spent on the model:
        the night's budget is the night's, not each job's. A job of this process is counted live by the
        tally, not from the ledger (whose figures may lag, or not be written yet)."""
        for run in runs:
            if run.dry_run or self.tally.knows(run.id):
                continue
            for s in run.steps:
                spent = (s.llm_calls, s.prompt_tokens + s.completion_tokens)
                for acc in [self.ledger] + ([self.ledger_team.setdefault(team, [0, 0])] if run.team == team else []):
                    acc[0] += spent[0]
                    acc[1] += spent[1]

    @contextmanager
    def asking(self, team: str, admitted: Sequence[Estimate]) -> Iterator[None]:
        """Around the calls of the batches ``admitted``: their reservation becomes what the provider
        counted for them (the estimate when it counts nothing), also when the calls fail."""
        with usage_scope() as used:
            try:
                yield
            finally:
                calls, tokens = used.calls, used.prompt_tokens + used.completion_tokens
                est = (sum(e.calls for e in admitted), sum(e.tokens for e in admitted))
                if calls == 0:
                    calls, tokens = est
                self.tally.add(self.run_id, team, calls - est[0], tokens - est[1])


R = TypeVar("R")
A = TypeVar("A")


def ask_in_rounds(
    gate: Gate | None,
    team: str,
    requests: Sequence[R],
    ask: Callable[[list[R]], Sequence[A]],
    *,
    batches: Sequence[Sequence[int]],
    cost: Callable[[list[R]], Estimate],
    width: int,
    free: Sequence[int] = (),
) -> tuple[dict[int, A], Reason | None]:
    """The answers by index into ``requests``, and why the rest were not asked (None: all were).

    ``ask`` answers a list of requests in order (the provider's ``distill_many`` / ``classify_many``).
    Without a gate that can stop anything (no budget, no deadline), every request in one go, in their
    order. Otherwise ``batches`` (indexes into ``requests``, one list per call, in asking order) go
    a round of at most ``width`` calls at a time, each round let through by the gate and charged what
    it took: the first batch the gate holds back ends the asking, so a batch is asked whole or left
    whole for the next night. ``free`` (indexes the provider answers without a call: no cost) go with
    the first round the gate lets through."""
    if not requests:
        return {}, None
    if gate is None or not gate.limited:
        return dict(enumerate(ask(list(requests)))), None
    queue, small = [list(b) for b in batches], list(free)
    got: dict[int, A] = {}
    while queue or small:
        nxt = queue[:width]
        costs = [cost([requests[i] for i in b]) for b in nxt]
        n, reason = gate.admit(team, costs)
        if n == 0 and (nxt or reason == "window"):
            return got, reason
        ids = [*small, *(i for b in nxt[:n] for i in b)]
        with gate.asking(team, costs[:n]):
            got.update(zip(ids, ask([requests[i] for i in ids]), strict=True))
        queue, small = queue[n:], []
        if reason is not None and queue:
            return got, reason
    return got, None


def _over(spent: int, limit: int | None) -> bool:
    return limit is not None and spent > limit


class Tallies:
    """A process's tallies, one per scheduled night (the last few kept): what its concurrent team
    jobs of that night share."""

    def __init__(self, keep: int = 4) -> None:
        self._keep = keep
        self._by_night: dict[str, Tally] = {}
        self._lock = threading.Lock()

    def of(self, night: str) -> Tally:
        with self._lock:
            if night not in self._by_night:
                for old in sorted(self._by_night)[: -(self._keep - 1)]:
                    del self._by_night[old]
                self._by_night[night] = Tally()
            return self._by_night[night]
