"""The command line of memory a person can inspect, export, forget and undo: `patterns`, `forget`, `undo`,
`export`, `import`.

``cli.py`` builds the rest of the parser and dispatches here (`import`, long work with progress, runs in
``cli_ops``); the work is in ``memory_admin``. Forget and import write, so they hold the consolidation
lease like `run-once`: a night never runs halfway through them.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.models import PatternStatus
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli_args import iso_time, team_name
from taskzilla_sleep.night import progress
from taskzilla_sleep.rules.access import Access

BY_HELP = "who decides (recorded as cli:NAME; default: your login name)"


def record_by(args: argparse.Namespace) -> None:
    """A person's name typed in a shell is free text: it is recorded as ``cli:NAME`` (the login name
    when ``--by`` is not given), so it never passes for an API token's name."""
    if hasattr(args, "by"):
        name = (args.by or "").strip() or _login_name()
        args.by = name if name.startswith("cli:") else f"cli:{name}"


def operator(args: argparse.Namespace) -> Access:
    """The person at the command line, as the audit trail records them: ``--by`` (``cli:NAME``), else
    ``cli:`` and the login name; an admin of every team (the shell holds the stores' credentials)."""
    by = getattr(args, "by", None)
    return Access(name=by if isinstance(by, str) and by else f"cli:{_login_name()}", teams=None, role="admin")


def read_input(file: str) -> tuple[str, str]:
    """A command's input file ('-': stdin) as UTF-8 text, with the name errors give it."""
    source = "<stdin>" if file == "-" else file
    try:
        raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        return source, raw.decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no USER variable and no passwd entry (a bare container)
        return "unknown"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    pat = sub.add_parser("patterns", parents=[common], help="inspect a team's beliefs")
    psub = pat.add_subparsers(dest="patterns_command", required=True, metavar="ACTION")
    plist = psub.add_parser("list", parents=[common], help="list a team's patterns")
    plist.add_argument("--team", type=team_name, required=True)
    plist.add_argument("--status", choices=[s.value for s in PatternStatus])
    plist.add_argument("--limit", type=int, default=50)
    plist.add_argument("--offset", type=int, default=0)
    plist.add_argument("--json", action="store_true", help="machine-readable output")
    pshow = psub.add_parser("show", parents=[common], help="one pattern: evidence, contradictions, links, history")
    pshow.add_argument("id")
    pshow.add_argument("--team", type=team_name, required=True)
    pshow.add_argument("--json", action="store_true", help="machine-readable output")

    prel = psub.add_parser(
        "release",
        parents=[common],
        help="a belief is wrong: its absorbed messages raw again (retired ones with their archived text), it retires",
    )
    prel.add_argument("id")
    prel.add_argument("--team", type=team_name, required=True)
    prel.add_argument("--by", help=BY_HELP)
    prel.add_argument("--reason", required=True, help="why (kept with the retired belief and in the audit log)")
    prel.add_argument("--now", type=iso_time, help=argparse.SUPPRESS)
    prel.add_argument("--json", action="store_true", help="machine-readable output")

    und = sub.add_parser(
        "undo",
        parents=[common],
        help="roll back everything one run did while its archive lasts (decay.archive_days)",
    )
    und.add_argument("run_id", metavar="RUN_ID", help="a run's id (report, the console's Nights page)")
    und.add_argument(
        "--cascade", action="store_true", help="also undo the later changes that built on it, newest first"
    )
    und.add_argument("--dry-run", action="store_true", help="say what would be undone, change nothing")
    und.add_argument("--by", help=BY_HELP)
    und.add_argument("--reason", required=True, help="why (kept with the run and in the audit log)")
    und.add_argument("--now", type=iso_time, help=argparse.SUPPRESS)
    und.add_argument("--json", action="store_true", help="machine-readable output")

    fg = sub.add_parser("forget", parents=[common], help="forget an episode, every episode of a person, or a pattern")
    fsub = fg.add_subparsers(dest="forget_command", required=True, metavar="WHAT")
    for what, arg, helptext in (
        ("episode", "id", "one message"),
        ("author", "name", "every message this person wrote in the team (delete my data)"),
        ("pattern", "id", "one belief (its absorbed messages become raw again)"),
    ):
        f = fsub.add_parser(what, parents=[common], help=helptext)
        f.add_argument(arg)
        f.add_argument("--team", type=team_name, required=True)
        f.add_argument("--by", help="who asked (kept in the tombstone as cli:NAME; default: your login name)")
        f.add_argument("--reason", required=True, help="why (kept in the tombstone)")
        f.add_argument("--now", type=iso_time, help=argparse.SUPPRESS)
        f.add_argument("--json", action="store_true", help="machine-readable output")

    ex = sub.add_parser("export", parents=[common], help="write a team's whole memory as JSONL")
    ex.add_argument("--team", type=team_name, required=True)
    ex.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")

    im = sub.add_parser("import", parents=[common], help="read an export into the configured stores")
    im.add_argument("file", help="an export file; '-' reads stdin")
    im.add_argument("--replace", action="store_true", help="delete the team's memory in the target first")
    im.add_argument(
        "--as-team",
        type=team_name,
        metavar="NEW",
        help="copy the file's team as team NEW (new ids; the file's own team is left as it is)",
    )
    im.add_argument(
        "--no-trailer",
        action="store_true",
        help="import an export written before trailers (its completeness cannot be checked: a warning)",
    )
    im.add_argument("--json", action="store_true", help="machine-readable output")
    progress.add_flags(im)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else text)


@contextlib.contextmanager
def admin_lease(graph: Any, settings: Settings) -> Iterator[None]:
    from taskzilla_sleep.core.host import holder_id
    from taskzilla_sleep.runtime.lease import LEASE_NAME, Lease, holding

    lease = Lease(graph, LEASE_NAME, settings.worker.lease_ttl_s, me=holder_id("memory-admin"))

    def tell(holder: str | None, expires_in_s: float) -> None:
        print(
            f"taskzilla-sleep: waiting for the {LEASE_NAME} lease, held by {holder or 'another process'} "
            f"(expires in {expires_in_s:.0f} s unless renewed; Ctrl-C to give up)",
            file=sys.stderr,
            flush=True,
        )

    lease.acquire(wait=True, on_busy=tell)
    with holding(lease):
        yield


def cmd_patterns(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.admin import list_patterns, show_pattern
    from taskzilla_sleep.service.memory_service import require_known_team

    if args.patterns_command == "release":
        return _release(args, settings, secrets)
    with build(settings, secrets) as s:
        if args.patterns_command == "list":
            status = PatternStatus(args.status) if args.status else None
            found = list_patterns(s.graph, args.team, status, args.limit, args.offset)
            if not found and args.offset == 0:  # a team that has no data at all: a typo, not "no beliefs"
                require_known_team(s.graph, args.team, s.graph.teams())
            lines = [
                f"{p.id} [{p.status.value}{', pinned' if p.pinned else ''}] {p.confidence:.2f} "
                f"({p.support_count} episodes) {p.statement}"
                for p in found
            ]
            emit(args, [p.model_dump(mode="json") for p in found], "\n".join(lines) or "(no patterns)")
            return 0
        d = show_pattern(s.graph, args.team, args.id)
    p = d.pattern
    lines = [
        f"{p.id} [{p.status.value}] {p.kind.value}, confidence {p.confidence:.2f}, {p.support_count} episodes",
        f"  {p.statement}",
        f"  created {p.created_at.isoformat()}, updated {p.updated_at.isoformat()}"
        + (f", pinned by {p.pinned_by}" if p.pinned else "")
        + (f", superseded by {p.superseded_by}" if p.superseded_by else "")
        + (f", archived by {p.archived_by} at {p.archived_at}: {p.archived_reason}" if p.archived_by else ""),
        "evidence:",
        *(f"  {e.id} {e.ts.isoformat()} {e.author} in {e.channel} [{e.status.value}] {e.text}" for e in d.evidence),
        *(f"  {i} (no longer stored)" for i in d.missing_evidence),
        "contradictions:",
        *(
            f"  {c.id} [{c.status.value}, {c.kind.value}] {c.old_pattern_id} vs {c.new_pattern_id}"
            for c in d.contradictions
        ),
        "links:",
        *(f"  {lk.relation} {'->' if lk.direction == 'out' else '<-'} {lk.other}" for lk in d.links),
        "runs:",
        *(f"  {r.id} ({r.trigger}) {', '.join(r.what)}" for r in d.runs),
    ]
    emit(args, d.model_dump(mode="json"), "\n".join(lines))
    return 0


def cmd_forget(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.admin import forget_author, forget_episode, forget_pattern
    from taskzilla_sleep.service.memory_service import audit

    now = args.now or datetime.now(UTC)
    floor = settings.distill.confidence_floor
    with build(settings, secrets) as s, admin_lease(s.graph, settings):
        if args.forget_command == "episode":
            report = forget_episode(s.graph, s.vectors, args.team, args.id, args.by, args.reason, now, floor)
        elif args.forget_command == "author":
            report = forget_author(s.graph, s.vectors, args.team, args.name, args.by, args.reason, now, floor)
        else:
            report = forget_pattern(s.graph, s.vectors, args.team, args.id, args.by, args.reason, now, floor)
        ids = [*report.episodes_forgotten, *report.patterns_forgotten]
        audit(operator(args), "forget", args.team, ids, reason=args.reason, rescored=len(report.patterns_rescored))
    emit(args, report.model_dump(mode="json"), report.summary())
    return 0


def _release(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.archive import release_pattern
    from taskzilla_sleep.memory.index import rebuild_memory
    from taskzilla_sleep.service.memory_service import audit

    now = args.now or datetime.now(UTC)
    with build(settings, secrets) as s, admin_lease(s.graph, settings):
        report = release_pattern(
            s.graph,
            s.vectors,
            args.team,
            args.id,
            args.by,
            args.reason,
            now,
            rebuild_index=lambda teams: rebuild_memory(s.graph, settings, teams),
        )
    audit(operator(args), "release", args.team, [args.id, *report.given_back, *report.revived], reason=args.reason)
    emit(args, report.model_dump(mode="json"), report.summary())
    return 0


def cmd_undo(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.archive import undo_run
    from taskzilla_sleep.memory.index import rebuild_memory
    from taskzilla_sleep.service.memory_service import audit

    now = args.now or datetime.now(UTC)
    with build(settings, secrets) as s, admin_lease(s.graph, settings):
        report = undo_run(
            s.graph,
            s.vectors,
            args.run_id,
            args.by,
            args.reason,
            now,
            cascade=args.cascade,
            dry_run=args.dry_run,
            rebuild_index=lambda teams: rebuild_memory(s.graph, settings, teams),
        )
    if not args.dry_run and not report.already:
        audit(operator(args), "undo", ",".join(report.teams), report.undone, reason=args.reason, cascade=args.cascade)
    emit(args, report.model_dump(mode="json"), report.summary())
    return 0


def cmd_export(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.admin import export_team
    from taskzilla_sleep.service.memory_service import audit

    with build(settings, secrets) as s:
        if args.output is None:
            counts = export_team(s.graph, s.vectors, args.team, sys.stdout)
        else:
            # Written beside the target and renamed: a failed export never leaves half a file there.
            out = args.output
            fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent or Path("."))
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    counts = export_team(s.graph, s.vectors, args.team, f)
                os.replace(tmp, out)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        audit(operator(args), "export", args.team, lines=sum(counts.values()), to=str(args.output or "-"))
    what = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"
    print(f"exported team {args.team}: {what}", file=sys.stderr if args.output is None else sys.stdout)
    return 0


HANDLERS = {"patterns": cmd_patterns, "forget": cmd_forget, "export": cmd_export, "undo": cmd_undo}  # import: cli_ops
