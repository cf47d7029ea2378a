"""Progress of long commands (`ingest`, `run-once`, `import`, `reconcile`) on stderr: one helper for all four.

On a terminal: a single line rewritten in place (a bar, the count, the time so far), with a line kept
above it for each note (a phase starting) and a last line with the totals. Otherwise (stderr is a
pipe or a file, or ``--progress json``): one JSON object a line, ``{"event": "progress", "command":
…, "phase": …, "done": n, "total": m, "unit": …, "elapsed_s": …}``, at most one a second (and one
when a phase starts), and always a last one with ``"final": true`` and the command's ``totals``.
``--no-progress`` shows nothing. Stdout stays the command's own output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from typing import Literal, TextIO

Mode = Literal["bar", "json", "off"]
MODES = ("auto", "bar", "json")
JSON_EVERY_S = 1.0  # a log collector gets a heartbeat, not a flood
BAR_EVERY_S = 0.1  # a terminal redraws smoothly without flicker
BAR_WIDTH = 24


def add_flags(parser: argparse.ArgumentParser) -> None:
    """``--progress [auto|bar|json]`` and ``--no-progress``, the same on every long command."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--progress",
        nargs="?",
        const="auto",
        default=None,  # auto; not "auto" itself, or argparse would let --progress pass beside --no-progress
        choices=MODES,
        help="progress on stderr: bar (a line rewritten in place), json (a JSON event a line, at most one a "
        "second) or auto (default: bar on a terminal, json otherwise)",
    )
    group.add_argument("--no-progress", dest="progress", action="store_const", const="off", help="no progress")


def choose(requested: str | None, stream: TextIO) -> Mode:
    """The mode a ``--progress`` value means for ``stream`` (auto: a bar only on a terminal)."""
    if requested == "off":
        return "off"
    if requested in (None, "auto"):
        isatty = getattr(stream, "isatty", None)
        return "bar" if callable(isatty) and isatty() else "json"
    if requested not in ("bar", "json"):
        raise ValueError(f"progress mode {requested!r} is not one of auto, bar, json, off")
    return "bar" if requested == "bar" else "json"


class Progress:
    """Where a command is (``phase``, ``done`` of ``total`` ``unit``), shown as ``mode`` says.

    Commands also read it back to say what an interrupted run finished (``phases_done``) and where
    it stopped. ``clock`` and ``stream`` are parameters so tests drive time and read the output.
    """

    def __init__(
        self,
        command: str,
        mode: Mode,
        *,
        label: str | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        every_s: float | None = None,
    ) -> None:
        self.command, self.mode, self.label = command, mode, label or command
        self._stream = stream
        self._clock = clock
        self.every_s = every_s if every_s is not None else (BAR_EVERY_S if mode == "bar" else JSON_EVERY_S)
        self.began = clock()
        self._last: float | None = None  # when the last event or redraw went out
        self._drawn = False  # a bar line is on the terminal, to be cleared before any other line
        self.phase, self.unit = "", ""
        self.done = self.total = 0
        self.phases_done: list[str] = []

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()  # an error or Ctrl-C: its message starts on a clean line

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr  # read late: tests swap sys.stderr

    def elapsed(self) -> float:
        return self._clock() - self.began

    def update(
        self,
        done: int,
        total: int | None = None,
        *,
        phase: str | None = None,
        unit: str | None = None,
        note: str | None = None,
    ) -> None:
        """Record where the work is; show it when the rate allows (a new phase or a note: at once)."""
        started = phase is not None and phase != self.phase
        if started and self.phase:
            self.phases_done.append(self.phase)
        if phase is not None:
            self.phase = phase
        if unit is not None:
            self.unit = unit
        if total is not None:
            self.total = total
        self.done = done
        if self.mode == "off":
            return
        now = self._clock()
        due = self._last is None or now - self._last >= self.every_s
        if note is not None and self.mode == "bar":
            self._line(f"{self.label}: {note}")
        if due or started or note is not None:
            self._show(now, note)

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def finish(self, totals: Mapping[str, object], summary: str, done: int | None = None) -> None:
        """The last word: the bar gives way to ``summary``; JSON ends with a ``final`` event and ``totals``."""
        if done is not None:
            self.done = done
        if self.phase:
            self.phases_done.append(self.phase)
        if self.mode == "bar":
            self._line(f"{self.label}: {summary}")
        elif self.mode == "json":
            self._write(json.dumps(self._event(self._clock()) | {"final": True, "totals": dict(totals)}) + "\n")

    def clear(self) -> None:
        """Take the bar off the terminal (before a message about an interruption or an error)."""
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _event(self, now: float) -> dict[str, object]:
        return {
            "event": "progress",
            "command": self.command,
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "unit": self.unit,
            "elapsed_s": round(now - self.began, 2),
        }

    def _show(self, now: float, note: str | None) -> None:
        self._last = now
        if self.mode == "json":
            event = self._event(now) | ({"note": note} if note else {})
            self._write(json.dumps(event) + "\n")
        else:
            self._write("\r" + self.render(now) + "\x1b[K")
            self._drawn = True

    def render(self, now: float) -> str:
        """The bar line: ``ingest f: embed [#####…] 21% 54/256 vectors 3.1 s``."""
        head = f"{self.label}: {self.phase}" if self.phase else self.label
        took = f"{now - self.began:.1f} s"
        if self.total <= 0:
            return " ".join(x for x in (head, str(self.done), self.unit, took) if x)
        part = min(max(self.done / self.total, 0.0), 1.0)
        filled = int(part * BAR_WIDTH)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return f"{head} [{bar}] {int(part * 100):3d}% {self.done}/{self.total} {self.unit} {took}".rstrip()

    def _line(self, text: str) -> None:
        self.clear()
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
