"""The command line of long work an operator watches: `ingest` with progress, and what Ctrl-C left.

``cli.py`` builds the parser and dispatches here. Progress and interruption notes go to stderr (stdout
is the command's own output); exit 130 means interrupted, as for any shell command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import FrameType

from taskzilla_sleep.cli_memory import read_input
from taskzilla_sleep.ingest import IngestProgress, IngestReport
from taskzilla_sleep.settings import Secrets, Settings

EXIT_INTERRUPTED = 130
PROGRESS_EVERY_S = 5.0


def sigterm_interrupts() -> contextlib.AbstractContextManager[None]:
    """SIGTERM acts like Ctrl-C: the command records what it did, releases its lease and exits 130."""
    return on_sigterm(KeyboardInterrupt)


@contextlib.contextmanager
def on_sigterm(error: Callable[[], BaseException]) -> Iterator[None]:
    """While the body runs (in the main thread: signals reach no other), SIGTERM raises ``error()``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_it(_signum: int, _frame: FrameType | None) -> None:
        raise error()

    previous = signal.signal(signal.SIGTERM, raise_it)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class ProgressLines:
    """One stderr line per phase of an ingest and one every ``every_s`` while it embeds."""

    def __init__(
        self, source: str, lines: int, every_s: float = PROGRESS_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.source = source
        self.lines = lines
        self.every_s = every_s
        self._clock = clock
        self.began = clock()
        self._last = self.began
        self._phase = ""

    def _say(self, text: str) -> None:
        print(f"ingest {self.source}: {text}", file=sys.stderr, flush=True)
        self._last = self._clock()

    def elapsed(self) -> float:
        return max(self._clock() - self.began, 1e-6)

    def __call__(self, p: IngestProgress) -> None:
        if p.stored is None:
            if self._phase != "graph":
                self._phase = "graph"
                self._say(
                    f"{self.lines} lines read, {p.episodes} episodes valid; {p.present} already present, "
                    f"{p.skipped} skipped; writing the graph"
                )
            return
        if self._phase != "embed":
            self._phase = "embed"
            self._say(f"{p.stored} new episodes stored in the graph; embedding {p.to_embed}")
            return
        if self._clock() - self._last >= self.every_s and p.embedded < p.to_embed:
            pct = 100 * p.embedded // max(p.to_embed, 1)
            self._say(f"embedded {p.embedded}/{p.to_embed} ({pct}%), {p.embedded / self.elapsed():.0f} episodes/s")

    def totals(self, r: IngestReport, embedded: int) -> None:
        s = self.elapsed()
        self._say(
            f"done in {s:.1f} s: {self.lines} lines read, {r.new} new, {r.present} already present, "
            f"{r.skipped} skipped, {embedded} vectors written ({self.lines / s:.0f} lines/s)"
        )


class StepLines:
    """run-once's progress: a stderr line as each step starts (with how long the one before took),
    when ``show``; and what an interrupted run had finished, always."""

    def __init__(self, steps: list[str], show: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.steps, self.show, self._clock = steps, show, clock
        self.done: list[str] = []
        self.current: str | None = None
        self._began = self._step_began = clock()

    def _say(self, text: str) -> None:
        if self.show:
            print(f"run-once: {text}", file=sys.stderr, flush=True)

    def before_step(self, step: str) -> bool:
        """NightHooks.before_step: never holds a step back."""
        now = self._clock()
        took = f" ({self.current} took {now - self._step_began:.1f} s)" if self.current else ""
        if self.current:
            self.done.append(self.current)
        self.current, self._step_began = step, now
        i = self.steps.index(step) + 1 if step in self.steps else len(self.done) + 1
        self._say(f"step {i}/{len(self.steps)}: {step}{took}")
        return True

    def finished(self) -> None:
        if self.current:
            self.done.append(self.current)
            now = self._clock()
            self._say(f"done in {now - self._began:.1f} s ({self.current} took {now - self._step_began:.1f} s)")
            self.current = None

    def interrupted_note(self) -> str:
        done = ", ".join(self.done) or "none"
        left = [s for s in self.steps if s not in self.done]
        return (
            f"interrupted during {self.current or 'start-up'}: finished steps: {done}; "
            f"left: {', '.join(left) or 'none'} "
            "(the step in flight is recorded as abandoned). Re-run the same command to finish: every step is "
            "idempotent and resumes what was half done"
        )


def interrupted_note(source: str, p: IngestProgress) -> str:
    """What an interrupted ingest left stored, and how to finish it (checked against ``Ingestor``)."""
    rerun = "re-run the same command to finish the job"
    if p.stored is None:
        # The graph write is all or nothing; what it staged is invisible and reconcile removes it.
        return f"interrupted before anything from {source} was stored; {rerun}"
    missing = p.to_embed - p.embedded
    vectors = (
        f"; {missing} of them have no vector yet: the re-run embeds them (so does `taskzilla-sleep reconcile`, "
        "and the next night's reconcile)"
        if missing
        else ""
    )
    return (
        f"interrupted: {p.stored} new episodes from {source} were stored ({p.present} already present, "
        f"{p.skipped} skipped), {p.embedded} of {p.to_embed} vectors written{vectors}; {rerun} "
        "(stored episodes count as already present)"
    )


def cmd_ingest(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.ingest import Limits, episode_lines, parse_episode_lines

    source, text = read_input(args.file)  # InputError: one line naming the file, exit 1

    lines = episode_lines(text)
    # Validate before any store is opened: a bad file costs no server start and writes nothing.
    now = args.now or datetime.now(UTC)
    parse_episode_lines(lines, source, Limits.of(settings.ingest), now)
    show = args.progress or sys.stderr.isatty()
    shown = ProgressLines(source, sum(1 for ln in lines if ln.strip()))
    progress = IngestProgress(on_change=shown if show else None)
    try:
        with build(settings, secrets) as services, sigterm_interrupts():
            ingestor = services.ingestor(clock=(lambda: args.now) if args.now else None)
            report = ingestor.ingest_lines(lines, source, progress)
    except KeyboardInterrupt:
        print(f"taskzilla-sleep: {interrupted_note(source, progress)}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    if show:
        shown.totals(report, progress.embedded)
    out = {
        "new": report.new,
        "present": report.present,
        "skipped": report.skipped,
        "skipped_by_connector": report.skipped_by_connector,
        "vectors_repaired": report.vectors_repaired,
    }
    print(json.dumps(out, indent=2) if args.json else report.summary())
    return 0
