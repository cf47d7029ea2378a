"""The layer contract (pyproject ``[tool.importlinter]``) holds on the tree and breaks on an upward import.

import-linter's CLI is run as ``make lint`` runs it, on the real package and on a copy in tmp_path with
one import added against the layers: the contract must catch it, and name the import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package under ``root``, with ``root``'s pyproject.toml (no cache)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "240"}  # one import a line in its report
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "taskzilla_sleep", tmp_path / "taskzilla_sleep", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_import_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "upward", "why"),
    [
        (
            "core/text.py",
            "taskzilla_sleep.interfaces.cli",
            "taskzilla_sleep.core is not allowed to import taskzilla_sleep.interfaces",
        ),
        (
            "memory/facts.py",
            "taskzilla_sleep.night.pipeline",
            "taskzilla_sleep.memory is not allowed to import taskzilla_sleep.night",
        ),
        (
            "alerts/render.py",
            "taskzilla_sleep.llm.base",
            "taskzilla_sleep.alerts is not allowed to import taskzilla_sleep.llm",
        ),
    ],
)
def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path, module: str, upward: str, why: str) -> None:
    root = copy_tree(tmp_path)
    path = root / "taskzilla_sleep" / module
    path.write_text(path.read_text() + f"\nimport {upward}  # noqa: E402\n")
    done = lint_imports(root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Contracts: 2 kept, 1 broken." in done.stdout
    assert why in done.stdout
    assert f"taskzilla_sleep.{module.removesuffix('.py').replace('/', '.')} -> {upward}" in done.stdout


def test_a_concrete_store_outside_stores_breaks_its_contract(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    path = root / "taskzilla_sleep" / "memory" / "recall" / "query.py"
    path.write_text(path.read_text() + "\nimport taskzilla_sleep.stores.falkordb  # noqa: E402\n")
    done = lint_imports(root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Nothing outside stores/ names a concrete store" in done.stdout
    assert "taskzilla_sleep.memory.recall.query -> taskzilla_sleep.stores.falkordb" in done.stdout
