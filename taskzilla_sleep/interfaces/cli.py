"""The command line; nothing else parses argv. Exit codes: 0 ok, 1 failure or bad input, 2 usage/config,
130 interrupted (Ctrl-C or SIGTERM)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from taskzilla_sleep import __version__
from taskzilla_sleep.core.errors import ConfigError, TaskzillaError, UsageError
from taskzilla_sleep.core.logs import configure_logging
from taskzilla_sleep.core.settings import Secrets, Settings, load_settings, parse_scalar
from taskzilla_sleep.interfaces import cli_alerts, cli_args, cli_audit, cli_distill, cli_mcp, cli_memory, cli_ops
from taskzilla_sleep.interfaces.cli_memory import BY_HELP
from taskzilla_sleep.night import progress

LOG_LEVELS = ("debug", "info", "warning", "error")


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    d: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--config", type=cli_args.path, default=d, metavar="FILE", help="YAML config (env TASKZILLA_CONFIG)"
    )
    parser.add_argument(
        "--data-dir", type=cli_args.path, default=d, metavar="DIR", help="embedded stores, memory index, reports"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=argparse.SUPPRESS if suppress else [],
        metavar="KEY=VALUE",
        help="override one setting, e.g. --set graph.backend=neo4j (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        default=d,
        choices=LOG_LEVELS,
        help="log level (logs go to stderr; default warning, env TASKZILLA_LOG_LEVEL)",
    )


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="taskzilla-sleep", description="Memory consolidation for a team chat bot (graph + vectors)."
    )
    p.add_argument("--version", action="version", version=f"taskzilla-sleep {__version__}")
    _common(p, suppress=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    _common(common, suppress=True)

    demo = sub.add_parser(
        "demo", parents=[common], help="ingest the bundled sample week into embedded stores and show status"
    )
    demo.add_argument("--json", action="store_true", help="machine-readable output")

    ing = sub.add_parser("ingest", parents=[common], help="validate and store episodes from a JSONL file")
    ing.add_argument("file", help="episodes, one JSON object a line; '-' reads stdin")
    ing.add_argument("--now", type=cli_args.iso_time, help="the ingestion time to record (replay, tests); default: now")
    ing.add_argument("--json", action="store_true", help="machine-readable output")
    progress.add_flags(ing)

    st = sub.add_parser("status", parents=[common], help="store sizes, backend health, config in use")
    st.add_argument("--json", action="store_true", help="machine-readable output")

    ck = sub.add_parser(
        "check",
        parents=[common],
        help="ask the configured model one tiny question: 'model ok', or what to fix (exit 1)",
    )
    ck.add_argument("--json", action="store_true", help="machine-readable output")

    ro = sub.add_parser("run-once", parents=[common], help="run the nightly cycle (or some steps) now")
    ro.add_argument("--steps", help="comma-separated subset of prune,distill,reflect,decay (run in cycle order)")
    ro.add_argument(
        "--now", type=cli_args.iso_time, help="the clock for every decision, ISO-8601 with offset (replay, tests)"
    )
    ro.add_argument("--dry-run", action="store_true", help="print the plan as a diff and write nothing")
    ro.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once (exit 1) when a worker or another run-once holds the lease, instead of waiting",
    )
    ro.add_argument(
        "--team", type=cli_args.team_name, action="append", help="only these teams (repeatable; default all)"
    )
    ro.add_argument("--json", action="store_true", help="machine-readable output")
    progress.add_flags(ro)

    rec = sub.add_parser("recall", parents=[common], help="what the bot would get back for a query")
    rec.add_argument("query")
    rec.add_argument("--entity", help="only beliefs about this person/channel/project")
    rec.add_argument(
        "--team", type=cli_args.team_name, action="append", help="only these teams (repeatable; default all)"
    )
    rec.add_argument("-k", type=int, default=5, help="how many items (default 5)")
    rec.add_argument("--include-drafts", action="store_true", help="also the bot's own drafts (labelled draft)")
    rec.add_argument("--include-superseded", action="store_true", help="also replaced beliefs (labelled SUPERSEDED)")
    rec.add_argument("--now", type=cli_args.iso_time, help="the clock recorded as access time")
    rec.add_argument("--json", action="store_true", help="machine-readable output (same as --format json)")
    rec.add_argument("--format", choices=("text", "json", "prompt"), help="prompt: a block for a model's system prompt")
    rec.add_argument("--budget", type=int, default=500, help="--format prompt: at most this many tokens (estimated)")

    facts = sub.add_parser("facts", parents=[common], help="pinned facts: declared by a person, immune to every step")
    fsub = facts.add_subparsers(dest="facts_command", required=True, metavar="ACTION")
    fpin = fsub.add_parser("pin", parents=[common], help="pin a fact")
    fpin.add_argument("text")
    fpin.add_argument("--by", help=BY_HELP)
    fpin.add_argument("--entity", help="the person (or thing) it is about")
    fpin.add_argument("--team", type=cli_args.team_name, help="the team (default: the only team in the stores)")
    fpin.add_argument("--now", type=cli_args.iso_time, help=argparse.SUPPRESS)
    fpin.add_argument("--json", action="store_true", help="machine-readable output (as the API returns it)")
    flist = fsub.add_parser("list", parents=[common], help="list pinned facts")
    flist.add_argument("--team", type=cli_args.team_name)
    flist.add_argument("--json", action="store_true", help="machine-readable output")
    funpin = fsub.add_parser("unpin", parents=[common], help="unpin (archive) a fact")
    funpin.add_argument("id")
    funpin.add_argument("--by", help=BY_HELP)
    funpin.add_argument("--now", type=cli_args.iso_time, help=argparse.SUPPRESS)
    funpin.add_argument("--json", action="store_true", help="machine-readable output (as the API returns it)")

    con = sub.add_parser("contradictions", parents=[common], help="the human loop: list and resolve contradictions")
    csub = con.add_subparsers(dest="con_command", required=True, metavar="ACTION")
    clist = csub.add_parser("list", parents=[common], help="list contradictions")
    clist.add_argument("--status", choices=["open", "resolved"], default="open")
    clist.add_argument("--json", action="store_true", help="machine-readable output")
    cres = csub.add_parser("resolve", parents=[common], help="resolve one: keep new, old or both")
    cres.add_argument("id")
    cres.add_argument("--keep", required=True, choices=["new", "old", "both"])
    cres.add_argument("--by", help=BY_HELP)
    cres.add_argument("--note", help="why")
    cres.add_argument("--now", type=cli_args.iso_time, help=argparse.SUPPRESS)
    cres.add_argument("--json", action="store_true", help="machine-readable output (as the API returns it)")

    wk = sub.add_parser("worker", parents=[common], help="the long-running worker: schedule, watchdog, HTTP API")
    wk.add_argument("--no-api", action="store_true", help="do not serve the HTTP API")
    wk.add_argument("--api-port", type=cli_args.port_number, help="override api.port (0: any free port)")
    wk.add_argument(
        "--clock-start", type=cli_args.iso_time, help=argparse.SUPPRESS
    )  # replays and tests: a controlled clock
    wk.add_argument("--clock-speed", type=float, default=1.0, help=argparse.SUPPRESS)

    rep = sub.add_parser("report", parents=[common], help="nightly metrics, trends and health signals for ops")
    rep.add_argument("--runs", type=int, default=14, help="how many nights (default 14)")
    rep.add_argument(
        "--html", type=cli_args.path, help="where to write the HTML report (default DATA_DIR/memory/report.html)"
    )
    rep.add_argument("--json", action="store_true", help="machine-readable output")

    rc = sub.add_parser("reconcile", parents=[common], help="find (and repair) drift between the two stores")
    rc.add_argument("--check", action="store_true", help="only report; exit 1 when drift is found")
    rc.add_argument("--json", action="store_true", help="machine-readable output")
    progress.add_flags(rc)
    cli_memory.add_parsers(sub, common)  # patterns, forget, export, import
    cli_mcp.add_parser(sub, common)  # mcp
    cli_alerts.add_parsers(sub, common)  # alerts list, alerts requeue
    cli_audit.add_parsers(sub, common)  # audit list
    cli_distill.add_parsers(sub, common)  # distill retry
    return p


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = parse_scalar(raw)
    if args.data_dir is not None:
        out["data_dir"] = str(args.data_dir)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    cli_memory.record_by(args)
    secrets = Secrets.from_env(os.environ)
    try:
        # The demo prints what its night did (the contradiction too): a warning log line above it is
        # noise there, unless asked for.
        quiet = "error" if args.command == "demo" else "warning"
        level = args.log_level or os.environ.get("TASKZILLA_LOG_LEVEL") or quiet
        if level.lower() not in LOG_LEVELS:
            raise ConfigError(f"config error: TASKZILLA_LOG_LEVEL = {level!r}: must be one of {', '.join(LOG_LEVELS)}")
        configure_logging(level=level.lower(), secrets=secrets.values())
        settings = load_settings(args.config, os.environ, _overrides(args))
        handler = {
            "demo": cmd_demo,
            "ingest": cli_ops.cmd_ingest,
            "status": cmd_status,
            "check": cli_ops.cmd_check,
            "reconcile": cli_ops.cmd_reconcile,
            "import": cli_ops.cmd_import,
            "run-once": cmd_run_once,
            "recall": cmd_recall,
            "facts": cmd_facts,
            "contradictions": cmd_contradictions,
            "worker": cmd_worker,
            "report": cmd_report,
            **cli_memory.HANDLERS,  # patterns, forget, export
            **cli_mcp.HANDLERS,  # mcp
            **cli_alerts.HANDLERS,  # alerts
            **cli_audit.HANDLERS,  # audit
            **cli_distill.HANDLERS,  # distill retry
        }[args.command]
        return handler(args, settings, secrets)
    except TaskzillaError as exc:
        print(f"taskzilla-sleep: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        # The last resort for the machine's own failures (disk full, a file vanished, permissions):
        # one line naming the file, never a traceback.
        where = " ".join(f"{f}" for f in (exc.filename, exc.filename2) if f)
        print(f"taskzilla-sleep: {exc.strerror or exc}" + (f": {where}" if where else ""), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("taskzilla-sleep: interrupted", file=sys.stderr)
        return 130


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def cmd_status(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.interfaces.status import collect_status

    report = collect_status(settings, secrets)
    _emit(args, report.model_dump(mode="json"), report.render())
    return 0 if report.healthy else 1


def cmd_demo(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.interfaces.demo import run_demo

    chosen = args.data_dir is not None or bool(os.environ.get("TASKZILLA_DATA_DIR"))
    result = run_demo(settings, secrets, keep_dir=chosen)
    _emit(args, result.data, result.text)
    return 0 if result.ok else 1


def _now(args: argparse.Namespace) -> datetime:
    return getattr(args, "now", None) or datetime.now(UTC)


def cmd_run_once(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.core.models import STEP_NAMES
    from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, parse_steps, run_night
    from taskzilla_sleep.observe.report.night import plan_totals, render_night, render_plan

    steps = parse_steps(args.steps)
    shown = cli_ops.StepLines(
        [x for x in STEP_NAMES if x in (steps or STEP_NAMES)], cli_ops.progress_for(args, "run-once")
    )
    hooks = NightHooks(before_step=shown.before_step)
    try:
        with build(settings, secrets) as s, shown.shown, cli_ops.sigterm_interrupts():
            request = NightRequest(now=_now(args), steps=steps, trigger="manual", dry_run=args.dry_run, teams=args.team)
            if args.dry_run:
                result = run_night(s, request, hooks)  # writes nothing, so it needs no lease and overlaps anything
            else:
                with _consolidation_lease(s.graph, settings, wait=not args.no_wait):
                    result = run_night(s, request, hooks)
            summary = plan_totals(result) if args.dry_run else None  # a dry run ends with its totals
            shown.finished(cli_ops.run_totals(result.run.steps) | {"dry_run": args.dry_run}, summary)
            text = render_plan(result) if args.dry_run else render_night(result, s.graph)
            data = result.run.model_dump(mode="json") | {
                "plan": {k: [ln for p in v for ln in p.lines()] for k, v in result.plans.items()},
                "notes": result.notes,
            }
    except KeyboardInterrupt:
        return cli_ops.say_interrupted(shown.shown, f"run-once {shown.interrupted_note()}")
    _emit(args, data, text)
    bad = next((r for r in result.run.steps if r.status not in ("ok", "skipped", "deferred")), None)
    if bad is not None:
        # The last line names the cause (the report above says it too, among the other steps).
        why = bad.error or "no error recorded"
        print(f"taskzilla-sleep: run-once: {bad.step} {bad.status}: {why}", file=sys.stderr)
    return 0 if result.ok else 1


@contextlib.contextmanager
def _consolidation_lease(graph: Any, settings: Settings, wait: bool) -> Iterator[None]:
    """Hold the worker's lease around a run-once: a worker's night and another run-once never overlap it."""
    from taskzilla_sleep.core.host import holder_id
    from taskzilla_sleep.runtime.lease import LEASE_NAME, Lease, holding, refuse_if_teams_busy

    lease = Lease(graph, LEASE_NAME, settings.worker.lease_ttl_s, me=holder_id("run-once"))

    def tell(holder: str | None, expires_in_s: float) -> None:
        print(
            f"taskzilla-sleep: waiting for the {LEASE_NAME} lease, held by {holder or 'another process'} "
            f"(it expires in {expires_in_s:.0f} s unless its holder renews it; Ctrl-C to give up)",
            file=sys.stderr,
            flush=True,
        )

    waited = lease.acquire(wait=wait, on_busy=tell)
    if not wait:
        refuse_if_teams_busy(lease)  # holding() would wait for the team jobs running
    if waited >= 1:
        print(f"taskzilla-sleep: got the {LEASE_NAME} lease after {waited:.0f} s", file=sys.stderr, flush=True)
    with holding(lease):
        yield


def cmd_recall(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.recall import recall, render_prompt
    from taskzilla_sleep.service.memory_service import require_known_team

    if args.k < 1:
        raise UsageError("-k must be at least 1")
    args.json = args.json or args.format == "json"
    if args.budget < 1:
        raise UsageError("--budget must be at least 1 token")
    with build(settings, secrets) as s:
        items = recall(
            s.graph,
            s.vectors,
            args.query,
            _now(args),
            teams=args.team,
            entity=args.entity,
            k=args.k,
            include_drafts=args.include_drafts,
            include_superseded=args.include_superseded,
            min_similarity=settings.recall.min_similarity,
            pool=s.recall_pool,
        )
        if not items:  # a team that has no data at all is a typo, not "nothing known"
            for team in args.team or ():
                require_known_team(s.graph, team, s.graph.teams())
    text = "\n".join(i.render() for i in items) or "(nothing recalled)"
    if args.format == "prompt" and not args.json:
        text = render_prompt(items, args.budget)
    _emit(args, [i.model_dump(mode="json") for i in items], text)
    return 0


def _team(s: Any, wanted: str | None) -> str:
    if wanted:
        return wanted
    teams = s.graph.teams()
    if len(teams) == 1:
        return str(teams[0])
    raise UsageError(f"--team is required (teams in the stores: {', '.join(teams) or 'none yet'})")


def cmd_facts(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.cli_memory import operator
    from taskzilla_sleep.memory import facts
    from taskzilla_sleep.service.memory_service import audit

    with build(settings, secrets) as s:
        if args.facts_command == "pin":
            f = facts.pin(s.graph, s.vectors, _team(s, args.team), args.text, args.by, _now(args), args.entity)
            audit(operator(args), "pin", f.team, [f.id])
            _emit(args, f.model_dump(mode="json"), f"pinned {f.id}: {f.statement}")
        elif args.facts_command == "unpin":
            f = facts.unpin(s.graph, s.vectors, args.id, args.by, _now(args))
            audit(operator(args), "unpin", f.team, [f.id])
            _emit(args, f.model_dump(mode="json"), f"unpinned {f.id} (archived by {f.archived_by})")
        else:
            found = facts.list_facts(s.graph, args.team)
            lines = [
                f"{f.id} [{f.status.value}] {f.statement} (pinned by {f.pinned_by}"
                + (f", about {', '.join(f.subjects)}" if f.subjects else "")
                + ")"
                for f in found
            ]
            _emit(args, [f.model_dump(mode="json") for f in found], "\n".join(lines) or "(no pinned facts)")
    return 0


def cmd_contradictions(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.cli_memory import operator
    from taskzilla_sleep.memory import contradictions
    from taskzilla_sleep.service.memory_service import ContradictionView, audit

    with build(settings, secrets) as s:
        if args.con_command == "resolve":
            same = contradictions.resolved_the_same_way(s.graph.get_contradiction(args.id), args.keep, args.note)
            c = contradictions.resolve(  # also answers the chat alerts about it
                s.graph,
                s.vectors,
                args.id,
                args.keep,
                args.by,
                args.note,
                _now(args),
                settings.distill.confidence_floor,
            )
            audit(operator(args), "resolve", c.team, [c.id], keep=args.keep, note=args.note, unchanged=same)
            text = f"resolved {c.id}: kept {c.resolution} (by {c.resolved_by})"
            if same:  # a repeat of the recorded decision: exit 0, nothing written
                when = c.resolved_at.isoformat() if c.resolved_at else "?"
                text = f"already resolved the same way: {c.id} kept {c.resolution} (by {c.resolved_by} at {when})"
            _emit(args, c.model_dump(mode="json"), text)
            return 0
        found = s.graph.contradictions(status=args.status)
        beliefs = {p.id: p for p in s.graph.patterns_by_id([i for c in found for i in c.pattern_ids])}
        lines = [line for c in found for line in contradictions.describe(c, beliefs)]
        # The API's shape (GET /v1/contradictions): the contradiction, and the text of both beliefs.
        data = [
            ContradictionView(
                contradiction=c,
                old=beliefs[c.old_pattern_id].statement if c.old_pattern_id in beliefs else None,
                new=beliefs[c.new_pattern_id].statement if c.new_pattern_id in beliefs else None,
            ).model_dump(mode="json")
            for c in found
        ]
        _emit(args, data, "\n".join(lines) or f"(no {args.status} contradictions)")
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from zoneinfo import ZoneInfo

    from taskzilla_sleep.app import build
    from taskzilla_sleep.interfaces.worker import Worker
    from taskzilla_sleep.night.schedule import Clock, RealClock, ScaledClock

    if args.clock_speed <= 0:
        raise UsageError("--clock-speed must be positive")
    clock: Clock = (
        ScaledClock(args.clock_start, args.clock_speed)
        if args.clock_start
        else RealClock(ZoneInfo(settings.schedule.timezone))
    )
    token = secrets.api_token.get_secret_value() if secrets.api_token else None
    with build(settings, secrets) as services:
        worker = Worker(services, clock, api_token=token, serve_api=not args.no_api, api_port=args.api_port)
        url = worker.start_api()
        print(f"taskzilla-sleep worker: pid {os.getpid()}, API {url or 'off'}, data {settings.data_dir}", flush=True)
        return worker.run()


def cmd_report(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    """The last --runs nights with their health verdicts; exit 1 when any verdict is "bad".

    The HTML page is always written (the text view names it) so an operator can open the charts in
    a browser without a server; the JSON is the report's model plus the page's path.
    """
    from taskzilla_sleep.app import build, writable_dir
    from taskzilla_sleep.night.steps.distill.retry import given_up
    from taskzilla_sleep.observe.report.html import write_html
    from taskzilla_sleep.observe.report.model import build_report
    from taskzilla_sleep.observe.report.text import render_text

    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    html = args.html or settings.memory_dir / "report.html"
    if html.is_dir():
        raise UsageError(f"--html {html} is a directory: give the path of the HTML file to write")
    writable_dir(html.parent, "the HTML report's directory", "choose another path with --html FILE")
    with build(settings, secrets) as s:
        report = build_report(
            s.graph,
            args.runs,
            index_cap=settings.memory_index.max_entries,
            grace_days=settings.decay.grace_hours / 24,
            tz=settings.schedule.timezone,
            given_up=given_up(s.graph),
        )
        written = write_html(report, html)
    if args.json:
        text = json.dumps(report.model_dump(mode="json") | {"html": str(written)}, indent=2)
    else:
        text = render_text(report) + f"\n\ncharts: {written}"
    print(text)
    return report.exit_code
