"""The command line; nothing else parses argv. Exit codes: 0 ok, 1 failure or bad input, 2 usage/config."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from taskzilla_sleep import __version__
from taskzilla_sleep.errors import TaskzillaError, UsageError
from taskzilla_sleep.logs import configure_logging
from taskzilla_sleep.settings import Secrets, Settings, load_settings

SAMPLE = "data/sample_week.jsonl"


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    d: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--config", type=Path, default=d, metavar="FILE", help="YAML config (env TASKZILLA_CONFIG)")
    parser.add_argument(
        "--data-dir", type=Path, default=d, metavar="DIR", help="embedded stores, memory index, reports"
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
        choices=["debug", "info", "warning", "error"],
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
    ing.add_argument("--json", action="store_true", help="machine-readable output")

    st = sub.add_parser("status", parents=[common], help="store sizes, backend health, config in use")
    st.add_argument("--json", action="store_true", help="machine-readable output")

    rc = sub.add_parser("reconcile", parents=[common], help="find (and repair) drift between the two stores")
    rc.add_argument("--check", action="store_true", help="only report; exit 1 when drift is found")
    rc.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = yaml.safe_load(raw) if raw else ""
    if args.data_dir is not None:
        out["data_dir"] = str(args.data_dir)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    level = args.log_level or os.environ.get("TASKZILLA_LOG_LEVEL", "warning")
    secrets = Secrets.from_env(os.environ)
    configure_logging(
        level=level,
        secrets=[s.get_secret_value() for s in (secrets.neo4j_password, secrets.chroma_token, secrets.api_token) if s],
    )
    try:
        settings = load_settings(args.config, os.environ, _overrides(args))
        handler = {
            "demo": cmd_demo,
            "ingest": cmd_ingest,
            "status": cmd_status,
            "reconcile": cmd_reconcile,
        }[args.command]
        return handler(args, settings, secrets)
    except TaskzillaError as exc:
        print(f"taskzilla-sleep: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("taskzilla-sleep: interrupted", file=sys.stderr)
        return 130


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def cmd_ingest(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build

    if args.file == "-":
        source, lines = "<stdin>", sys.stdin.read().splitlines()
    else:
        path = Path(args.file)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            print(f"taskzilla-sleep: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 1
        except UnicodeDecodeError as exc:
            print(f"taskzilla-sleep: {path}: not UTF-8 text ({exc.reason} at byte {exc.start})", file=sys.stderr)
            return 1
        source = str(path)
    # Validate before any store is opened: a bad file costs no server start and writes nothing.
    from taskzilla_sleep.ingest import parse_episode_lines

    parse_episode_lines(lines, source, settings.ingest.max_text_chars)
    with build(settings, secrets) as services:
        report = services.ingestor().ingest_lines(lines, source)
    data = {
        "new": report.new,
        "present": report.present,
        "skipped": report.skipped,
        "skipped_by_connector": report.skipped_by_connector,
        "vectors_repaired": report.vectors_repaired,
    }
    _emit(args, data, report.summary())
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.status import collect_status

    report = collect_status(settings, secrets)
    _emit(args, report.model_dump(mode="json"), report.render())
    return 0 if report.healthy else 1


def cmd_reconcile(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.reconcile import reconcile

    with build(settings, secrets) as services:
        report = reconcile(services.graph, services.vectors, repair=not args.check)
    text = f"drift: {report.missing} missing vectors, {report.orphans} orphan vectors; repaired {report.repaired}"
    _emit(args, report.model_dump(mode="json") | {"drift": report.drift}, text)
    return 1 if args.check and report.drift else 0


def sample_lines() -> list[str]:
    return resources.files("taskzilla_sleep").joinpath(SAMPLE).read_text(encoding="utf-8").splitlines()


def cmd_demo(args: argparse.Namespace, settings: Settings, secrets: Secrets) -> int:
    from taskzilla_sleep.app import build
    from taskzilla_sleep.status import collect_status

    # The demo always runs on the embedded defaults, offline: no server, no network, no model hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    chosen = args.data_dir is not None or bool(os.environ.get("TASKZILLA_DATA_DIR"))
    tmp = None if chosen else tempfile.TemporaryDirectory(prefix="taskzilla-demo-")
    data_dir = Path(tmp.name) if tmp else settings.data_dir
    embedded = settings.model_copy(
        update={
            "data_dir": data_dir,
            "graph": settings.graph.model_copy(update={"backend": "falkordb"}),
            "vector": settings.vector.model_copy(update={"backend": "chroma-embedded"}),
            "embeddings": settings.embeddings.model_copy(update={"provider": "offline"}),
            "llm": settings.llm.model_copy(update={"model": None}),
        }
    )
    try:
        with build(embedded, secrets) as services:
            report = services.ingestor().ingest_lines(sample_lines(), f"taskzilla_sleep/{SAMPLE}")
        status = collect_status(embedded, secrets)
        where = "a temporary folder (removed on exit)" if tmp else str(data_dir)
        text = "\n".join(
            [
                f"demo: ingested the bundled sample week into embedded stores in {where}",
                f"ingest: {report.summary()}",
                "",
                status.render(),
            ]
        )
        _emit(
            args,
            {"ingest": {"new": report.new, "present": report.present, "skipped": report.skipped}}
            | {"status": status.model_dump(mode="json")},
            text,
        )
        return 0 if status.healthy else 1
    finally:
        if tmp is not None:
            tmp.cleanup()
