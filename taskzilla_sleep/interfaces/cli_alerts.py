"""The command line of the chat alert outbox: `alerts list` and `alerts requeue`.

``cli.py`` builds the rest of the parser and dispatches here; the work is in ``alerts.admin``. An
operator on the command line is an admin of every team. Requeue writes only the failed alerts it
names (pending again, attempts 0, no last error), so it needs no lease: a running worker picks them
up on its next poll.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from taskzilla_sleep.core.errors import UsageError
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.rules.access import OPEN

STATUSES = ["pending", "sent", "failed", "dropped", "delivered"]  # "sent" is "delivered"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    al = sub.add_parser("alerts", parents=[common], help="chat alerts in the outbox: list, requeue failed ones")
    asub = al.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    ls = asub.add_parser("list", parents=[common], help="list alerts (oldest first), e.g. --status failed")
    ls.add_argument("--status", choices=STATUSES, help="only alerts with this status (sent: delivered)")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    rq = asub.add_parser("requeue", parents=[common], help="send failed alerts again (fresh attempt budget)")
    rq.add_argument("id", nargs="?", help="the alert's id (its key, as `alerts list` shows)")
    rq.add_argument("--all-failed", action="store_true", help="every failed alert")
    rq.add_argument("--json", action="store_true", help="machine-readable output")


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def _line(a: Any) -> str:
    why = a.last_error if a.status != "dropped" else a.dropped_reason
    team = a.team or "every team"
    return (
        f"{a.key} [{a.status}] {a.kind} for {team} -> {a.channel} ({a.channel_kind}), attempts {a.attempts}, "
        f"created {a.created_at.isoformat()}" + (f": {why}" if why else "") + f"\n  {a.title}"
    )


def cmd_alerts(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.alerts.admin import list_alerts, requeue_alerts
    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.cli_memory import operator
    from taskzilla_sleep.service.memory_service import audit

    if args.alerts_command == "requeue" and bool(args.id) == bool(args.all_failed):
        raise UsageError("alerts requeue: give an alert id or --all-failed (not both)")
    with build(settings, secrets) as s:
        if args.alerts_command == "list":
            found = list_alerts(s.graph, OPEN, args.status)
            lines = [_line(a) for a in found]
            _emit(args, [a.model_dump(mode="json") for a in found], "\n".join(lines) or "(no alerts)")
            return 0
        report = requeue_alerts(s.graph, OPEN, datetime.now(UTC), None if args.all_failed else [args.id])
        for team in sorted({a.team or "" for a in report.alerts}):
            keys = [a.key for a in report.alerts if (a.team or "") == team]
            audit(operator(args), "requeue_alert", team or None, keys, requeued=report.requeued)
    lines = [f"requeued {report.requeued} failed alert{'' if report.requeued == 1 else 's'}"]
    lines += [f"  {a.key} [{a.status}] -> {a.channel}" for a in report.alerts]
    _emit(args, report.model_dump(mode="json"), "\n".join(lines))
    return 0


HANDLERS = {"alerts": cmd_alerts}
