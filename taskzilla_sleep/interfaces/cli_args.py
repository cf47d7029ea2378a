"""The command line's argument types, one of each for every subcommand (a path, a team name, a time, a
port): argparse reports what is wrong with the value and exits 2 before anything is opened."""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from pathlib import Path

from taskzilla_sleep.core.models import EARLIEST_TIME, LATEST_TIME, TEAM_RE


def path(raw: str) -> Path:
    if not raw.strip():
        raise argparse.ArgumentTypeError("an empty path is not allowed")
    return Path(raw)


def team_name(raw: str) -> str:
    if not re.fullmatch(TEAM_RE, raw):
        raise argparse.ArgumentTypeError(
            f"invalid team name {raw!r}: 1-48 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return raw


def iso_time(raw: str) -> datetime:
    """An ISO-8601 time with its UTC offset, inside the years the stores hold."""
    try:
        t = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {raw!r}") from exc
    if t.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} has no UTC offset (write e.g. 2026-11-30T03:05:00+01:00)")
    if not EARLIEST_TIME <= t < LATEST_TIME:  # the stores hold no time outside: it would poison every night
        raise argparse.ArgumentTypeError(f"{raw!r} is outside the years 1900 to 8999")
    return t


def port_number(raw: str) -> int:
    """A TCP port (0: any free one)."""
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {raw!r}")
    return port
