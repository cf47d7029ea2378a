"""The command line of distill's given-up groups: `distill retry`.

``cli.py`` builds the rest of the parser and dispatches here; the work is in ``steps.distill.retry``.
Retry writes the episodes' distill marks, so it holds the consolidation lease like `run-once` and
`import`: no night or watchdog distill runs halfway through it.
"""

from __future__ import annotations

import argparse
from typing import Any

from taskzilla_sleep.core.errors import UsageError
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli_args import team_name
from taskzilla_sleep.interfaces.cli_memory import admin_lease, emit


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    d = sub.add_parser("distill", parents=[common], help="distill's groups without a usable answer: retry")
    dsub = d.add_subparsers(dest="distill_command", required=True, metavar="ACTION")
    rt = dsub.add_parser(
        "retry",
        parents=[common],
        help="ask the groups distill gave up on again, the next night (fresh distill.max_attempts nights)",
    )
    rt.add_argument("--team", type=team_name, action="append", help="this team's given-up groups (repeatable)")
    rt.add_argument("--all", action="store_true", help="every team's given-up groups")
    rt.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_distill(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.night.steps.distill.retry import given_up, release_given_up

    if bool(args.team) == bool(args.all):
        raise UsageError("distill retry: give --team TEAM (repeatable) or --all (not both)")
    tries = settings.distill.max_attempts
    with build(settings, secrets) as s:
        if args.team:
            unknown = sorted(set(args.team) - set(s.graph.teams()))
            if unknown:
                known = ", ".join(s.graph.teams()) or "none yet"
                raise UsageError(f"distill retry: no team {', '.join(unknown)} in the stores (teams: {known})")
        with admin_lease(s.graph, settings):
            teams = sorted(set(args.team)) if args.team else sorted(given_up(s.graph))
            released = release_given_up(s.graph, teams)
    lines = [
        f"team {t}: {n} message(s) of given-up groups pending again: the next nightly distill asks about them"
        if n
        else f"team {t}: no group given up (none got no usable answer on {tries} nights)"
        for t, n in released.items()
    ] or ["no team has a group given up"]
    if any(released.values()):
        asked = " ".join(f"--team {t}" for t, n in released.items() if n)
        lines.append(f"to ask now instead: taskzilla-sleep run-once --steps distill {asked}")
    emit(args, {"released": released, "max_attempts": tries}, "\n".join(lines))
    return 0


HANDLERS = {"distill": cmd_distill}
