"""The command line of the audit trail: `audit list`, who decided what, newest first.

Reads ``DATA_DIR/audit.jsonl`` (``taskzilla_sleep.service.audit_trail``) and opens no store: it works while the
stores are down. An operator on the command line sees every team's records.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli_args import iso_time, team_name
from taskzilla_sleep.service.audit_trail import AUDIT_FILE, AuditLog, AuditRecord

IDS_SHOWN = 3
MAX_LIMIT = 10_000


def _action(raw: str) -> str:
    if not re.fullmatch(r"[a-z][a-z_]{0,47}", raw):
        raise argparse.ArgumentTypeError(f"not an action name (e.g. resolve, forget, pin): {raw!r}")
    return raw


def _limit(raw: str) -> int:
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"--limit must be a whole number from 1 to {MAX_LIMIT}, not {raw!r}")
    return int(raw)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    au = sub.add_parser("audit", parents=[common], help="the audit trail: who decided what")
    asub = au.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    ls = asub.add_parser("list", parents=[common], help="decisions on record, newest first")
    ls.add_argument("--team", type=team_name, help="only this team's records")
    ls.add_argument("--action", type=_action, help="only this action (resolve, pin, unpin, forget, ingest, ...)")
    ls.add_argument("--since", type=iso_time, help="only records at or after this time (ISO-8601 with offset)")
    ls.add_argument("--limit", type=_limit, default=50, help="at most this many records (default 50)")
    ls.add_argument("--json", action="store_true", help="machine-readable output (one list of records)")


def line(r: AuditRecord) -> str:
    """One record on one line: when, who (role), what, team, ids, and what the action adds."""
    ids = ", ".join(r.ids[:IDS_SHOWN]) + (f" (+{r.n - IDS_SHOWN} more)" if r.n > IDS_SHOWN else "")
    extra = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(r.details.items()) if v is not None)
    when = r.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return " ".join(x for x in (when, f"{r.who} ({r.role})", r.action, r.team or "-", ids, extra) if x)


def cmd_audit(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    found = AuditLog(settings.data_dir / AUDIT_FILE).read(
        team=args.team, action=args.action, since=args.since, limit=args.limit
    )
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in found], indent=2, ensure_ascii=False))
    else:
        print("\n".join(line(r) for r in found) or "(no decisions on record)")
    return 0


HANDLERS = {"audit": cmd_audit}
