"""Delivery: claim the due alerts of each channel, post them, record the outcome in the outbox.

What happens after a failed attempt is one pure decision, ``RetryStrategy.decide``: give up or
when to try again, whether the channel's other alerts wait with it, whether it is a config
problem. It reads plain data (the attempt count, the error, the time), so it is unit tested
without HTTP or a store; the loop here only applies the decision to the outbox and logs it.
Delivery is at-least-once: a crash after the POST and before the mark repeats the POST, with the
same idempotency key.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog

from taskzilla_sleep.alerts.outbox import Alert, Outbox
from taskzilla_sleep.alerts.senders import ERROR_MAX, Sender
from taskzilla_sleep.core.errors import DeliveryError
from taskzilla_sleep.core.settings import AlertChannel, AlertSettings

log = structlog.get_logger(__name__)


def backoff_delay(failures: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``failures``-th failed attempt: exponential, capped, "equal jitter".

    Half the capped delay is fixed and half random, so replicas and channels that failed together
    don't retry in lockstep, and the wait never drops below half the schedule.
    """
    ceiling = min(max_s, base_s * 2.0 ** min(max(failures - 1, 0), 60))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@dataclass(frozen=True)
class RetryDecision:
    """What to do with an alert after a failed attempt."""

    attempts: int  # attempts made, the failed one included (what the outbox will store)
    give_up: bool  # max_attempts reached: the alert becomes ``failed`` (kept and listed)
    retry_at: datetime  # its next attempt (stored even on give up; a requeue resets it)
    # The channel's other pending alerts wait until ``retry_at`` too: a receiver that is down,
    # overloaded or rate-limiting gets one probe per backoff period, not one per alert.
    defer_channel: bool
    # A redirect or a 4xx other than 408/409/425/429: the channel's config is wrong. Retried
    # anyway (it may be fixed while the alert waits), but logged as an error, and the channel's
    # other alerts are not held back by it.
    config_problem: bool


@dataclass(frozen=True)
class RetryStrategy:
    """Exponential backoff with equal jitter, capped at ``max_s``, for at most ``max_attempts`` attempts."""

    max_attempts: int
    base_s: float
    max_s: float

    @classmethod
    def from_settings(cls, settings: AlertSettings) -> RetryStrategy:
        return cls(settings.max_attempts, settings.backoff_base_s, settings.backoff_max_s)

    def decide(
        self, attempts_before: int, error: BaseException, now: datetime, rng: random.Random | None = None
    ) -> RetryDecision:
        """The decision after an attempt failed with ``error``; ``attempts_before`` is the count before it.

        A receiver's ``retry_after_s`` (HTTP Retry-After, Telegram's ``retry_after``) is honoured
        up to ``max_s``, never shortening our own backoff. ``rng`` is drawn from exactly once.
        """
        attempts = attempts_before + 1
        delay = backoff_delay(attempts, self.base_s, self.max_s, rng)
        delivery = error if isinstance(error, DeliveryError) else None
        if delivery is not None and delivery.retry_after_s is not None:
            delay = max(delay, min(delivery.retry_after_s, self.max_s))
        config = delivery is not None and delivery.config_problem
        return RetryDecision(
            attempts=attempts,
            give_up=attempts >= self.max_attempts,
            retry_at=now + timedelta(seconds=delay),
            defer_channel=not config,
            config_problem=config,
        )


@dataclass
class ChannelReport:
    delivered: int = 0
    retried: int = 0  # failed this round, will be tried again
    failed: int = 0  # gave up this round (max_attempts reached)
    dropped: int = 0  # not sent: its contradiction no longer open, or its team no longer the channel's
    errors: list[str] = field(default_factory=list)  # secret-free


@dataclass
class DeliveryReport:
    by_channel: dict[str, ChannelReport] = field(default_factory=dict)

    @property
    def delivered(self) -> int:
        return sum(r.delivered for r in self.by_channel.values())

    @property
    def retried(self) -> int:
        return sum(r.retried for r in self.by_channel.values())

    @property
    def failed(self) -> int:
        return sum(r.failed for r in self.by_channel.values())

    @property
    def dropped(self) -> int:
        return sum(r.dropped for r in self.by_channel.values())


def deliver_due(
    outbox: Outbox,
    senders: Mapping[str, Sender],
    settings: AlertSettings,
    now: datetime,
    *,
    limit: int = 50,
    rng: random.Random | None = None,
) -> DeliveryReport:
    """Deliver the due alerts of every channel that has a sender; never raises for a channel's failure.

    Channels run in parallel (one thread each) so a channel that hangs until ``timeout_s`` delays
    nobody else. Within a channel, alerts go one at a time (at most ``limit`` a round); the first
    failure ends that channel's round, and a transient one (timeout, connection error, 429, 5xx)
    also defers the channel's other alerts to the same next attempt: they would fail the same way.
    Alerts of channels without a sender (removed or disabled in the config) stay pending and listed.
    """
    report = DeliveryReport(by_channel={name: ChannelReport() for name in senders})
    if not senders:
        return report
    strategy = RetryStrategy.from_settings(settings)
    # Long enough for one POST (with a margin for the graph writes around it); a worker that dies
    # mid-attempt has its alert retried after this.
    lease = timedelta(seconds=2 * settings.timeout_s + 30)
    with ThreadPoolExecutor(max_workers=min(len(senders), 8), thread_name_prefix="alerts") as pool:
        futures = [
            pool.submit(
                _deliver_channel,
                outbox,
                s,
                settings.channels.get(n),
                strategy,
                lease,
                now,
                limit,
                rng,
                report.by_channel[n],
            )
            for n, s in sorted(senders.items())
        ]
        for name, f in zip(sorted(senders), futures, strict=True):
            try:
                f.result()  # _deliver_channel catches what it expects; this is the last guard
            except Exception as exc:
                report.by_channel[name].errors.append(type(exc).__name__)
                log.error("alert_channel_round_failed", channel=name, error=type(exc).__name__)
    if report.delivered or report.retried or report.failed or report.dropped:
        log.info(
            "alerts_delivery_round",
            delivered=report.delivered,
            retried=report.retried,
            failed=report.failed,
            dropped=report.dropped,
        )
    return report


def _deliver_channel(
    outbox: Outbox,
    sender: Sender,
    channel: AlertChannel | None,
    strategy: RetryStrategy,
    lease: timedelta,
    now: datetime,
    limit: int,
    rng: random.Random | None,
    rep: ChannelReport,
) -> None:
    started = time.monotonic()
    for _ in range(limit):
        try:
            alert = outbox.claim(sender.channel, now, lease)
        except Exception as exc:  # a store failure ends this channel's round, not the others'
            rep.errors.append(f"claim: {type(exc).__name__}")
            log.error("alert_claim_failed", channel=sender.channel, error=sender.mask(str(exc))[:ERROR_MAX])
            return
        if alert is None:
            return
        if _dropped(outbox, sender, channel, alert, rep):
            continue
        if not _attempt(outbox, sender, strategy, alert, now, rng, rep):
            return
        if time.monotonic() - started > lease.total_seconds() / 2:
            return  # leave the rest for the next round rather than outlive our own claims


def _dropped(outbox: Outbox, sender: Sender, channel: AlertChannel | None, alert: Alert, rep: ChannelReport) -> bool:
    """A claimed alert is not sent when its contradiction was resolved (or removed) since it was
    queued, or when its channel's ``teams`` no longer include the alert's team.

    Checked after the claim, right before the POST: a person who resolved it in the meantime gets
    no stale question, and a backlog queued before a channel was limited to some teams does not
    leak to it. True if the alert is not to be sent now (a store failure leaves it to a later round).
    """
    ctx = {"alert_key": alert.key, "channel": sender.channel, "kind": alert.kind}
    try:
        reason = outbox.obsolete_reason(alert)
        if reason is None and channel is not None and not channel.routes(alert.team):
            whose = f"team {alert.team}" if alert.team else "every team"
            reason = f"channel {sender.channel} is not for {whose} (alerts.channels.{sender.channel}.teams)"
        if reason is None:
            return False
        marked = outbox.mark_dropped(alert.key, reason)  # False: no longer pending (another replica had it)
    except Exception as exc:
        rep.errors.append(f"drop check: {type(exc).__name__}")
        log.error("alert_drop_check_failed", **ctx, error=sender.mask(str(exc))[:ERROR_MAX])
        return True  # not sent this round: the claim's lease brings it back for another look
    if marked:
        rep.dropped += 1
        log.info("alert_dropped", **ctx, reason=reason)
    return True


def _attempt(
    outbox: Outbox,
    sender: Sender,
    strategy: RetryStrategy,
    alert: Alert,
    now: datetime,
    rng: random.Random | None,
    rep: ChannelReport,
) -> bool:
    """One POST of one alert, recorded in the outbox. True if it was delivered."""
    ctx = {"alert_key": alert.key, "channel": sender.channel, "kind": alert.kind}
    try:
        ref = sender.send(alert.message, alert.key)  # the posted message's id, when the channel gives one
    except Exception as exc:
        error = str(exc) if isinstance(exc, DeliveryError) else sender.mask(f"{type(exc).__name__}: {exc}")
        _failed(outbox, sender, strategy.decide(alert.attempts, exc, now, rng), alert, now, error, ctx, rep)
        return False
    try:
        outbox.mark_delivered(alert.key, now, ref)
    except Exception as store_exc:
        # Posted but not recorded: it will be posted again after the lease, with the same key.
        log.error("alert_mark_failed", **ctx, error=sender.mask(str(store_exc))[:ERROR_MAX])
        rep.errors.append(f"delivered but not recorded: {type(store_exc).__name__}")
        rep.delivered += 1
        return False
    rep.delivered += 1
    log.info("alert_delivered", **ctx, attempts=alert.attempts + 1)
    return True


def _failed(
    outbox: Outbox,
    sender: Sender,
    decision: RetryDecision,
    alert: Alert,
    now: datetime,
    error: str,
    ctx: dict[str, str],
    rep: ChannelReport,
) -> None:
    """Apply a retry decision to the outbox, count it and log it (``error`` is already secret-free)."""
    try:
        outbox.mark_failed_attempt(alert.key, now, error, decision.retry_at, decision.give_up)
    except Exception as store_exc:
        log.error("alert_mark_failed", **ctx, error=sender.mask(str(store_exc))[:ERROR_MAX])
    rep.errors.append(error[:ERROR_MAX])
    if decision.defer_channel:
        try:
            outbox.defer_channel(sender.channel, decision.retry_at)
        except Exception as store_exc:
            log.error("alert_defer_failed", **ctx, error=sender.mask(str(store_exc))[:ERROR_MAX])
    if decision.give_up:
        rep.failed += 1
        log.error("alert_gave_up", **ctx, attempts=decision.attempts, error=error)
        return
    rep.retried += 1
    (log.error if decision.config_problem else log.warning)(
        "alert_config_problem" if decision.config_problem else "alert_retry",
        **ctx,
        attempts=decision.attempts,
        error=error,
        next_attempt_at=decision.retry_at.isoformat(),
    )
