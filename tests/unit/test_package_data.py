"""Every file the package reads at run time ships in the wheel: the container installs the package
(not an editable checkout), so a template or query left out of ``package-data`` breaks only there
(once: the console's templates after they moved under ``interfaces/``)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "taskzilla_sleep"


def test_every_file_of_the_package_that_is_not_python_is_in_package_data() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "taskzilla_sleep"
    ]
    files = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert len(files) > 20  # the data, the console's templates and static files, the Cypher queries
    left_out = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert left_out == [], f"not in [tool.setuptools.package-data]: {left_out}"
    stale = [g for g in globs if not any(fnmatch.fnmatch(f, g) for f in files)]
    assert stale == [], f"package-data globs that match no file: {stale}"
