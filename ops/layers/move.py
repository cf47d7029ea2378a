"""Issue 30 item 1: the flat package moved into packages by layer, and every reference rewritten.

Re-runnable and idempotent: ``python ops/layers/move.py`` from the repository root

1. ``git mv``-s each old module or package of ``MOVES`` that still exists to its new place (a path
   already moved is skipped; a file added later under an old package directory is moved with it:
   ``git mv`` of what is left is done file by file into the new directory);
2. rewrites every reference to an old path in the repository's tracked text files (Python, TOML, YAML,
   Makefile, Dockerfile, Markdown): dotted names (``taskzilla_sleep.worker.time`` in a monkeypatch,
   ``python -m taskzilla_sleep.cli``, ``importlib.resources.files("taskzilla_sleep.console")``), file
   paths (``taskzilla_sleep/cli.py``) and ``from taskzilla_sleep import a, b`` (split per new parent);
   a name already under its new path is left as it is, so running it twice changes nothing;
3. sorts the imports of the Python files it changed and formats them (ruff), when ``--no-ruff`` is not
   given.

Run it again after merging a branch written against the old layout: new files under old paths are
moved, old references in any file are rewritten.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

PKG = "taskzilla_sleep"

# old module or package (relative to taskzilla_sleep) -> its new place. Packages move whole.
MOVES: dict[str, str] = {
    # core: what everything may use; imports nothing above it
    "models": "core.models",
    "errors": "core.errors",
    "settings": "core.settings",
    "instruments": "core.instruments",
    "text": "core.text",
    "faults": "core.faults",
    "logs": "core.logs",
    "throttle": "core.throttle",
    # rules: pure judgement over models and settings
    "beliefs": "rules.beliefs",
    "policies": "rules.policies",
    "entities": "rules.entities",
    "access": "rules.access",
    # stores: the ports and what implements them (the embedder is a port too)
    "embeddings": "stores.embeddings",
    # memory: what a team's memory is made of and how it changes outside a night
    "ingest": "memory.ingest",
    "inflight": "memory.inflight",
    "recall": "memory.recall",
    "facts": "memory.facts",
    "contradictions": "memory.contradictions",
    "resolving": "memory.contradictions",  # folded into it (one resolve), after the move
    "memory_admin": "memory.admin",
    "memory_index": "memory.index",
    "vector_upkeep": "memory.vector_upkeep",
    "quarantine": "memory.quarantine",
    "archive": "memory.archive",
    "reconcile": "memory.reconcile",
    "edits": "memory.edits",
    "vector_meta": "memory.vector_meta",
    # night: the nightly cycle
    "steps": "night.steps",
    "pipeline": "night.pipeline",
    "budget": "night.budget",
    "watchdog": "night.watchdog",
    "nights": "night.ledger",
    "progress": "night.progress",
    "scheduler": "night.schedule",
    # observe: what is told about it
    "metrics": "observe.metrics",
    "report": "observe.report",
    # runtime: more than one worker process
    "lease": "runtime.lease",
    "handover": "runtime.handover",
    "presence": "runtime.presence",
    # service: the access-checked, audited calls
    "service": "service.memory_service",
    "audit": "service.audit_trail",  # not ``audit``: memory_service has a function of that name
    # interfaces: what a person or a program talks to
    "cli": "interfaces.cli",
    "cli_alerts": "interfaces.cli_alerts",
    "cli_audit": "interfaces.cli_audit",
    "cli_distill": "interfaces.cli_distill",
    "cli_mcp": "interfaces.cli_mcp",
    "cli_memory": "interfaces.cli_memory",
    "cli_ops": "interfaces.cli_ops",
    "api": "interfaces.api",
    "console": "interfaces.console",
    "chatops": "interfaces.chatops",
    "mcp_server": "interfaces.mcp_server",
    "worker": "interfaces.worker",
    "demo": "interfaces.demo",
    "status": "interfaces.status",
}

# Each layer's package docstring: what lives there and what it may import (pyproject's importlinter
# contract holds the order: each layer imports only the layers below it).
LAYER_DOCS = {
    "core": "Layer 1, core: models, errors, settings, the instruments protocol, text and small shared helpers\n"
    "(logs, faults, throttle). Imports nothing else of taskzilla_sleep.\n",
    "rules": "Layer 2, rules: pure judgement (beliefs/, policies, entities, access). Imports only ``core``.\n",
    "memory": "Layer 5, memory: what a team's memory is and how it changes outside a night: ingest, recall,\n"
    "facts, contradictions and their resolution, admin (export, import, forget), the MEMORY.md index,\n"
    "vector upkeep, quarantine, the archive (undo), reconcile, ingests in flight.\n"
    "Imports ``alerts``, ``llm``, ``stores`` (ports only), ``rules``, ``core``.\n",
    "night": "Layer 6, night: the nightly cycle: steps/, the pipeline, the budget, the watchdog, the run ledger,\n"
    "progress, the schedule. Imports ``memory`` and below.\n",
    "observe": "Layer 7, observe: what is told about the nights: metrics, report/.\nImports ``night`` and below.\n",
    "runtime": "Layer 8, runtime: more than one worker process: the lease, the team handover, presence.\n"
    "Imports ``observe`` and below.\n",
    "service": "Layer 9, service: the calls every interface makes, access-checked and audited\n"
    "(memory_service, audit_trail). Imports ``runtime`` and below.\n",
    "interfaces": "Layer 11, interfaces: what a person or a program talks to: the CLI (cli*), the HTTP API, the\n"
    "console, chat ops, the MCP server, the worker daemon that wires them, demo and status. May import\n"
    "everything, ``taskzilla_sleep.app`` (layer 10, the composition root) included; nothing imports it.\n",
}

TEXT_SUFFIXES = {".py", ".toml", ".md", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".sh", ".json"}
TEXT_NAMES = {"Makefile", "Dockerfile", ".dockerignore"}
SKIP_PREFIXES = ("tests/data/", "ops/layers/")


def _children(new: str) -> set[str]:
    """The names directly under the package an old name became the parent of (``service`` ->
    ``service.memory_service``): ``taskzilla_sleep.service.audit_trail`` is already new, not old."""
    return {n.split(".", 1)[1].split(".")[0] for n in MOVES.values() if n.startswith(new + ".")}


def _dotted_patterns() -> list[tuple[re.Pattern[str], str]]:
    out = []
    for old, new in sorted(MOVES.items(), key=lambda kv: -len(kv[0])):
        kids = _children(old) if any(n.startswith(old + ".") for n in MOVES.values()) else set()
        guard = "".join(rf"(?!\.{re.escape(k)}\b)(?!\s+import\s+\(?\s*{re.escape(k)}\b)" for k in sorted(kids))
        if new.startswith(old + "."):
            # The old module's name is now its layer's (``service``): only a name taken from it is old;
            # ``taskzilla_sleep.service`` alone (the importlinter contract, a docstring) is the layer.
            guard += r"(?=\.[A-Za-z_]|\s+import\b)"
        pat = re.compile(rf"(?<![\w.]){PKG}\.{re.escape(old)}(?![\w]){guard}")
        out.append((pat, f"{PKG}.{new}"))
    return out


def _path_patterns() -> list[tuple[re.Pattern[str], str]]:
    out = []
    for old, new in MOVES.items():
        newp = new.replace(".", "/")
        # a module file, or a package directory (followed by / or the end of the name)
        out.append((re.compile(rf"(?<![\w/]){PKG}/{re.escape(old)}\.py(?!\w)"), f"{PKG}/{newp}.py"))
        if not new.startswith(old + "."):  # ``taskzilla_sleep/service/`` is the new layer's directory
            out.append((re.compile(rf"(?<![\w/]){PKG}/{re.escape(old)}(?=/)"), f"{PKG}/{newp}"))
    return out


FROM_PKG = re.compile(rf"^(?P<indent>[ \t]*)from {PKG} import (?P<names>\([^)]*\)|[^\n]*(?:\\\n[^\n]*)*)$", re.M)


def _split_from(match: re.Match[str]) -> str:
    indent, raw = match["indent"], match["names"]
    names = [n.strip() for n in raw.strip("()").replace("\\\n", " ").replace("\n", " ").split(",") if n.strip()]
    if not any(n.split(" as ")[0].strip() in MOVES for n in names):
        return match[0]
    groups: dict[str, list[str]] = {}
    for n in names:
        name, _, alias = n.partition(" as ")
        name = name.strip()
        parent, leaf = (MOVES[name].rpartition(".")[0], MOVES[name].rpartition(".")[2]) if name in MOVES else ("", name)
        module = f"{PKG}.{parent}" if parent else PKG
        if leaf != name and not alias:
            alias = name  # the code goes on using the old short name: ``from ...night import ledger as nights``
        groups.setdefault(module, []).append(f"{leaf} as {alias.strip()}" if alias else leaf)
    return "\n".join(f"{indent}from {m} import {', '.join(ns)}" for m, ns in groups.items())


def rewrite(text: str, python: bool) -> str:
    if python:
        text = FROM_PKG.sub(_split_from, text)
    for pat, repl in _dotted_patterns() + _path_patterns():
        text = pat.sub(repl, text)
    return text


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def move_files(root: Path) -> None:
    for old, new in MOVES.items():
        src_mod, src_pkg = root / PKG / f"{old}.py", root / PKG / old
        dst = root / PKG / new.replace(".", "/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src_mod.exists():
            git("mv", str(src_mod.relative_to(root)), str(dst.with_suffix(".py").relative_to(root)))
        elif src_pkg.is_dir() and not new.startswith(old + "."):  # ``service/`` is a layer now, not the old module
            if not dst.exists():
                git("mv", str(src_pkg.relative_to(root)), str(dst.relative_to(root)))
            else:  # moved before: bring what was added under the old directory since
                for f in sorted(p for p in src_pkg.rglob("*") if p.is_file()):
                    if "__pycache__" in f.parts:
                        continue
                    target = dst / f.relative_to(src_pkg)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if f.relative_to(root).as_posix() in git("ls-files", str(f.relative_to(root))):
                        git("mv", "-f", str(f.relative_to(root)), str(target.relative_to(root)))
                    else:
                        f.rename(target)
        for layer_dir in [dst.parent]:
            init = layer_dir / "__init__.py"
            if layer_dir != root / PKG and not init.exists():
                init.write_text(f'"""{LAYER_DOCS[layer_dir.name]}"""\n')
                git("add", str(init.relative_to(root)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-ruff", action="store_true", help="do not sort imports and format changed files")
    parser.add_argument("--ruff", default=str(Path(sys.executable).with_name("ruff")), help="the ruff to use")
    args = parser.parse_args()
    root = Path(git("rev-parse", "--show-toplevel").strip())
    move_files(root)
    changed: list[Path] = []
    for rel in git("-C", str(root), "ls-files").splitlines():
        path = root / rel
        if rel.startswith(SKIP_PREFIXES) or not path.is_file():
            continue
        if path.suffix not in TEXT_SUFFIXES and path.name not in TEXT_NAMES:
            continue
        try:
            before = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        after = rewrite(before, python=path.suffix == ".py")
        if after != before:
            path.write_text(after, encoding="utf-8")
            changed.append(path)
    py = [str(p) for p in changed if p.suffix == ".py"]
    if py and not args.no_ruff:
        subprocess.run([args.ruff, "check", "-q", "--select", "I", "--fix", *py], check=False)
        subprocess.run([args.ruff, "format", "-q", *py], check=False)
    print(f"{len(changed)} files rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
