"""The layers hold: read from the source with ``ast`` (no import is executed, no process started).

interfaces -> app -> service -> ... -> night -> memory -> stores -> rules -> core (the layers
themselves: import-linter, tests/unit/test_layers.py): no import circle, nothing outside ``stores/``
knows a concrete store, a metrics scrape loads no report view, and no module grows past ~500 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "taskzilla_sleep"
# The stores' implementations: only stores/ itself (and app's one way in, stores.backends) may name them.
CONCRETE = (
    "cypher",
    "memory",
    "neo4j",
    "falkordb",
    "falkordb_server",
    "falkordb_process",
    "chroma",
    "executor",
    "codec",
)
MAX_LINES = 520
# The whole store interface is one module on purpose (STYLE: all interfaces in one place, as APScheduler
# keeps them): it grows with the methods the steps need, not with the code behind them.
LONGER = {"taskzilla_sleep.stores.ports": 600}


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


MODULES = modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(tree: ast.AST, module_level_only: bool) -> Iterator[str]:
    """Every package module ``tree`` imports (``module_level_only``: what importing it runs at once —
    not imports inside functions, nor those only for type checkers)."""
    body: list[ast.AST] = list(ast.iter_child_nodes(tree)) if module_level_only else list(ast.walk(tree))
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("taskzilla_sleep"):
            for alias in node.names:
                found = _resolve(f"{node.module}.{alias.name}")
                if found:
                    yield found
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found = _resolve(alias.name) if alias.name.startswith("taskzilla_sleep") else None
                if found:
                    yield found


def graph(module_level_only: bool) -> dict[str, set[str]]:
    return {m: set(_imports(ast.parse(f.read_text()), module_level_only)) - {m} for m, f in MODULES.items()}


def test_no_import_circle() -> None:
    edges = graph(module_level_only=False)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_module_outside_stores_imports_a_concrete_store() -> None:
    concrete = {f"taskzilla_sleep.stores.{name}" for name in CONCRETE}
    offenders = {
        m: sorted(t for t in targets if any(t == c or t.startswith(c + ".") for c in concrete))
        for m, targets in graph(module_level_only=False).items()
        if not m.startswith("taskzilla_sleep.stores")
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_a_metrics_scrape_loads_no_report_view() -> None:
    edges = graph(module_level_only=True)
    seen: set[str] = set()
    todo = ["taskzilla_sleep.observe.metrics"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += sorted(edges[m])
    assert {"taskzilla_sleep.observe.report.nights", "taskzilla_sleep.observe.report.signals"} <= seen
    views = {f"taskzilla_sleep.observe.report.{m}" for m in ("html", "svg", "text", "formats", "night")}
    assert seen & views == set()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_about_500_lines(module: str) -> None:
    assert len(MODULES[module].read_text().splitlines()) <= LONGER.get(module, MAX_LINES)
