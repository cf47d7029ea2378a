"""The command line of long work an operator watches: `ingest`, `run-once`, `import`, `reconcile`
with progress (``progress.py``), and what Ctrl-C left.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import FrameType

from taskzilla_sleep.core.models import StepResult
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli_memory import admin_lease, emit, operator, read_input
from taskzilla_sleep.memory.ingest import IngestProgress
from taskzilla_sleep.night import progress as progress_view
from taskzilla_sleep.night.progress import Progress

EXIT_INTERRUPTED = 130


def progress_for(args: argparse.Namespace, command: str, label: str | None = None) -> Progress:
    """The progress ``--progress``/``--no-progress`` asked for, on stderr."""
    return Progress(command, progress_view.choose(args.progress, sys.stderr), label=label)


def say_interrupted(shown: Progress, note: str) -> int:
    shown.clear()
    print(f"taskzilla-sleep: {note}", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


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


def ingest_progress(shown: Progress, lines: int) -> Callable[[IngestProgress], None]:
    """An ingest's phases on ``shown``: the graph write (all or nothing), then the vectors in batches."""

    def on_change(p: IngestProgress) -> None:
        if p.stored is None:
            if shown.phase != "graph":
                note = (
                    f"{lines} lines read, {p.episodes} episodes valid; {p.present} already present, "
                    f"{p.skipped} skipped; writing the graph"
                )
                new = max(p.episodes - p.present - p.skipped, 0)
                shown.update(0, new, phase="graph", unit="episodes", note=note)
        elif shown.phase != "embed":
            note = f"{p.stored} new episodes stored in the graph; embedding {p.to_embed}"
            shown.update(p.embedded, p.to_embed, phase="embed", unit="vectors", note=note)
        else:
            shown.update(p.embedded, p.to_embed)

    return on_change


class StepLines:
    """run-once's progress on ``shown``: a note as each step starts (with how long the one before
    took), and what an interrupted run had finished."""

    def __init__(self, steps: list[str], shown: Progress) -> None:
        self.steps, self.shown = steps, shown
        self.done: list[str] = []
        self.current: str | None = None
        self._step_began = shown.elapsed()

    def before_step(self, step: str) -> bool:
        """NightHooks.before_step: never holds a step back."""
        now = self.shown.elapsed()
        took = f" ({self.current} took {now - self._step_began:.1f} s)" if self.current else ""
        if self.current:
            self.done.append(self.current)
        self.current, self._step_began = step, now
        i = self.steps.index(step) + 1 if step in self.steps else len(self.done) + 1
        note = f"step {i}/{len(self.steps)}: {step}{took}"
        self.shown.update(len(self.done), len(self.steps), phase=step, unit="steps", note=note)
        return True

    def finished(self, totals: Mapping[str, object], summary: str | None = None) -> None:
        """The last progress line: ``summary`` (a dry run's totals) or how long it took."""
        now = self.shown.elapsed()
        took = f" ({self.current} took {now - self._step_began:.1f} s)" if self.current else ""
        if self.current:
            self.done.append(self.current)
            self.current = None
        self.shown.finish(totals, summary or f"done in {now:.1f} s{took}", done=len(self.done))

    def interrupted_note(self) -> str:
        done = ", ".join(self.done) or "none"
        left = [s for s in self.steps if s not in self.done]
        return (
            f"interrupted during {self.current or 'start-up'}: finished steps: {done}; "
            f"left: {', '.join(left) or 'none'} "
            "(the step in flight is recorded as abandoned). Re-run the same command to finish: every step is "
            "idempotent and resumes what was half done"
        )


def run_totals(steps: Sequence[StepResult]) -> dict[str, object]:
    """A night's totals for the last progress event: per step its status and non-zero counts."""
    return {"steps": {r.step: {"status": r.status} | {k: v for k, v in r.counts.items() if v} for r in steps}}


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
    from taskzilla_sleep.memory.ingest import Limits, episode_lines, parse_episode_lines
    from taskzilla_sleep.service.memory_service import audit

    source, text = read_input(args.file)  # InputError: one line naming the file, exit 1

    lines = episode_lines(text)
    # Validate before any store is opened: a bad file costs no server start and writes nothing.
    now = args.now or datetime.now(UTC)
    parsed = parse_episode_lines(lines, source, Limits.of(settings.ingest), now)
    teams = ",".join(sorted({item.team for _, item in parsed})) or None  # who ingested into which teams
    read = sum(1 for ln in lines if ln.strip())
    shown = progress_for(args, "ingest", f"ingest {source}")
    progress = IngestProgress(on_change=ingest_progress(shown, read))
    try:
        with build(settings, secrets) as services, shown, sigterm_interrupts():
            ingestor = services.ingestor(clock=(lambda: args.now) if args.now else None)
            report = ingestor.ingest_lines(lines, source, progress)
            audit(
                operator(args),
                "ingest",
                teams,
                report.new_ids + report.edited_ids,
                present=report.present,
                edited=report.edited,
                source=source,
            )
    except KeyboardInterrupt:
        return say_interrupted(shown, interrupted_note(source, progress))
    out = {
        "new": report.new,
        "present": report.present,
        "skipped": report.skipped,
        "skipped_by_connector": report.skipped_by_connector,
        "edited": report.edited,
        "edits_ignored": report.edits_ignored,
        "vectors_repaired": report.vectors_repaired,
    }
    s = max(shown.elapsed(), 1e-6)
    shown.finish(
        out | {"lines": read, "vectors_written": progress.embedded},
        f"done in {s:.1f} s: {read} lines read, {report.new} new, "
        + (f"{report.edited} edited, " if report.edited else "")
        + (f"{report.edits_ignored} edits ignored (text gone), " if report.edits_ignored else "")
        + f"{report.present} already present, "
        f"{report.skipped} skipped, {progress.embedded} vectors written ({read / s:.0f} lines/s)",
    )
    print(json.dumps(out, indent=2) if args.json else report.summary())
    return 0


def cmd_import(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.admin.export_file import parse_export
    from taskzilla_sleep.memory.admin.transfer import import_team
    from taskzilla_sleep.memory.ingest import episode_lines
    from taskzilla_sleep.service.memory_service import audit

    source, text = read_input(args.file)
    lines = episode_lines(text)  # \n only: an export's JSON may hold U+2028 raw, which splitlines() would split
    parsed = parse_export(lines, source, trailer=not args.no_trailer)  # a bad file costs no store start
    team = args.as_team or parsed.team
    for warning in parsed.warnings:
        print(f"taskzilla-sleep: warning: {warning}", file=sys.stderr, flush=True)
    shown = progress_for(args, "import", f"import {source}")

    def tell(phase: str, done: int, total: int) -> None:
        unit = {"delete": "teams", "graph": "items", "vectors": "vectors"}.get(phase, "")
        shown.update(done, total, phase=phase, unit=unit)

    try:
        with build(settings, secrets) as s, shown, admin_lease(s.graph, settings), sigterm_interrupts():
            report = import_team(
                s.graph,
                s.vectors,
                lines,
                source,
                replace=args.replace,
                progress=tell,
                as_team=args.as_team,
                trailer=not args.no_trailer,
            )
            audit(operator(args), "import", report.team, replaced=report.replaced, source=source, counts=report.counts)
    except KeyboardInterrupt:
        return say_interrupted(shown, import_interrupted_note(team, shown, args.replace))
    what = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()) if v)
    embedded = ", ".join(f"{k} {v}" for k, v in sorted(report.vectors.items()))
    name = f"team {report.copied_from} as team {report.team}" if report.copied_from else f"team {report.team}"
    text_out = f"imported {name}{' (replaced)' if report.replaced else ''}: {what}; embedded {embedded}"
    if report.left_out:
        text_out += "; not copied: " + ", ".join(f"{k} {v}" for k, v in sorted(report.left_out.items()))
    shown.finish(report.model_dump(mode="json"), f"done in {shown.elapsed():.1f} s")
    emit(args, report.model_dump(mode="json"), text_out)
    return 0


def import_interrupted_note(team: str, shown: Progress, replace: bool) -> str:
    """What an interrupted import left, by the phase it was in (``transfer.import_team``'s order)."""
    rerun = "re-run the same command" if replace else "re-run it with --replace"
    finish = f"{rerun} to finish (it deletes the partial team first and imports the whole file)"
    if shown.phase == "delete":
        return f"interrupted while deleting team {team!r}'s memory (--replace), before importing; {finish}"
    if shown.phase == "graph":
        return (
            f"interrupted: {shown.done} of {shown.total} items of team {team!r} written to the graph, "
            f"no vectors yet; the team may be partly imported: {finish}"
        )
    if shown.phase == "vectors":
        return (
            f"interrupted: team {team!r} is in the graph; {shown.done} of {shown.total} vectors written: "
            f"`taskzilla-sleep reconcile` embeds the rest (so does the next night), or {finish}"
        )
    return "interrupted before anything was written; re-run the same command"


def cmd_reconcile(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.memory.reconcile import reconcile

    shown = progress_for(args, "reconcile")

    def tell(done: int, total: int) -> None:
        shown.update(done, total, phase="check" if args.check else "repair", unit="collections")

    try:
        with build(settings, secrets) as services, shown, sigterm_interrupts():
            report = reconcile(
                services.graph,
                services.vectors,
                repair=not args.check,
                progress=tell,
                floor=settings.distill.confidence_floor,
            )
    except KeyboardInterrupt:
        return say_interrupted(shown, reconcile_interrupted_note(shown, args.check))
    text = f"drift: {report.missing} missing vectors, {report.orphans} orphan vectors; repaired {report.repaired}"
    if report.in_flight:
        text += f"; {report.in_flight} episodes an ingest in flight is still embedding (not drift)"
    if report.stale_edits:
        what = "found" if args.check else "finished"
        text += f"; {what} {report.stale_edits} edits an interrupted ingest left pending"
    if report.reflagged:
        what = "found" if args.check else "wrote"
        text += f"; {what} {report.reflagged} injection flags missing or judged by an older lint"
    if report.rebuild_leftovers:
        what = "found" if args.check else "dropped"
        text += f"; {what} what an interrupted collection rebuild left: {', '.join(report.rebuild_leftovers)}"
    data = report.model_dump(mode="json") | {"drift": report.drift, "repaired": report.repaired}
    data["in_flight"] = report.in_flight
    totals = {k: data[k] for k in ("repair", "stale_stages", "stale_edits", "reflagged", "quarantined", "drift")}
    totals |= {"missing": report.missing, "orphans": report.orphans, "repaired": report.repaired}
    shown.finish(totals, f"done in {shown.elapsed():.1f} s: {text}")
    emit(args, data, text)
    return 1 if args.check and report.drift else 0


def reconcile_interrupted_note(shown: Progress, check: bool) -> str:
    """What an interrupted reconcile left: the collections not yet checked; a re-run starts over."""
    left = shown.total - shown.done if shown.phase else "all"
    return (
        f"reconcile interrupted: {shown.done} of {shown.total if shown.phase else '?'} team collections checked, "
        f"{left} left" + ("" if check else " (what was repaired stays repaired)") + "; re-run the same command to "
        "finish: it checks everything again and repairs what is left"
    )


def cmd_check(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    """`taskzilla-sleep check`: the model answers (exit 0), or what is wrong and what to fix (exit 1)."""
    from taskzilla_sleep.llm.check import check_model

    verdict = check_model(settings.llm)
    data = verdict.as_dict()
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        print(verdict.line())
    return 0 if verdict.ok else 1
