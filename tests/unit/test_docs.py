"""The docs a newcomer reads: a short README, a docs site whose reference pages are generated and current,
an example configuration of the everyday knobs that loads, and BENCHMARKS.md's figures not left behind."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops import docs_ref
from taskzilla_sleep.core.settings import load_settings, packaged_default_yaml
from tests.conftest import service_unavailable

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
MAX_README_BYTES = 12 * 1024
MAX_PACKAGE_COMMITS_BEHIND = 25


def test_the_readme_is_short_with_a_two_command_quick_start() -> None:
    text = README.read_text(encoding="utf-8")
    size = len(text.encode())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes (at most {MAX_README_BYTES})"
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", quick, re.S)
    assert block is not None, "the Quick start has no sh block"
    assert block.group(1).split("\n")[:-1] == ["make demo", "make test"]


def test_every_page_the_readme_links_exists() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not t.startswith("http")}
    assert {"docs/index.md", "docs/reference/configuration.md", "BENCHMARKS.md"} <= targets
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert not missing, f"README.md links to missing files: {missing}"


@pytest.mark.parametrize("page", sorted(docs_ref.PAGES, key=str), ids=lambda p: p.name)
def test_a_generated_reference_page_is_current(page: Path) -> None:
    assert page.exists(), f"{page.relative_to(ROOT)} is missing: run python -m ops.docs_ref"
    assert page.read_text(encoding="utf-8") == docs_ref.PAGES[page](), (
        f"{page.relative_to(ROOT)} is not current: run python -m ops.docs_ref"
    )


def _leaf_keys(node: dict[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, value in node.items():
        if isinstance(value, dict) and value and prefix + name not in ("ingest.write_discipline",):
            keys |= _leaf_keys(value, f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def test_the_configuration_reference_lists_every_knob_of_the_packaged_defaults() -> None:
    # Read independently of the generator: every key of the packaged default.yaml (and data_dir, commented
    # there) has one row, with its default as the settings model has it.
    page = docs_ref.CONFIG_PAGE.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([^`]+)` \| (\*\*everyday\*\*|advanced) \|", page, re.M))
    expected = _leaf_keys(yaml.safe_load(packaged_default_yaml())) | {"data_dir"}
    assert expected - set(rows) == set(), "knobs missing from docs/reference/configuration.md"
    row = r"^\| `distill.confidence_floor` \| advanced \| number \| `0.8` \| >= 0, <= 1 \| at or above"
    assert re.search(row, page, re.M), "a row shows the knob's level, type, default, bounds and meaning"


def test_every_key_of_the_example_exists_loads_and_is_everyday_in_the_reference(tmp_path: Path) -> None:
    settings = load_settings(docs_ref.EXAMPLE, env={"XDG_DATA_HOME": str(tmp_path)})
    assert settings.llm.model and settings.alerts.channels and settings.api.tokens
    everyday = docs_ref.everyday_keys()
    # The groups a new operator holds: the schedule, the stores, the model, chat, the API, retention.
    for key in ("schedule.timezone", "graph.backend", "vector.backend", "llm.model", "llm.night_budget.calls",
                "alerts.channels", "alerts.channels.<name>.kind", "api.tokens", "api.tokens.<name>.role",
                "decay.archive_days", "prune.stale_after_days"):  # fmt: skip
        assert key in everyday, key
    page = docs_ref.CONFIG_PAGE.read_text(encoding="utf-8")
    marked = set(re.findall(r"^\| `([^`]+)` \| \*\*everyday\*\* \|", page, re.M))
    assert marked == everyday
    assert len(marked) < len(re.findall(r"^\| `[^`]+` \| advanced \|", page, re.M)), "most knobs are advanced"


def test_a_key_the_settings_do_not_have_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "example.yaml"
    bad.write_text("schedule:\n  timezone: UTC\n  window_ends: '03:30'\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"schedule\.window_ends: no such setting"):
        docs_ref.everyday_keys(bad)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_the_benchmarks_are_at_most_25_package_commits_behind() -> None:
    try:
        inside = _git("rev-parse", "--is-inside-work-tree") == "true"
    except (OSError, subprocess.CalledProcessError):
        inside = False
    if not inside:
        service_unavailable("not a git checkout: BENCHMARKS.md's commit cannot be compared with HEAD")
    stated = re.search(r"^Figures as of commit `([0-9a-f]{7,40})`", BENCHMARKS.read_text(encoding="utf-8"), re.M)
    assert stated, "BENCHMARKS.md states no 'Figures as of commit `HASH`' line"
    commit = stated.group(1)
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT).returncode != 0:
        if _git("rev-parse", "--is-shallow-repository") == "true":
            service_unavailable(f"a shallow clone: {commit} is not in its history")
        pytest.fail(f"BENCHMARKS.md's commit {commit} is not in this repository's history")
    behind = int(_git("rev-list", "--count", f"{commit}..HEAD", "--", "taskzilla_sleep"))
    assert behind <= MAX_PACKAGE_COMMITS_BEHIND, (
        f"BENCHMARKS.md's figures are from {commit}, {behind} commits of taskzilla_sleep/ behind HEAD (at most "
        f"{MAX_PACKAGE_COMMITS_BEHIND}): re-run the benchmarks it names and update it"
    )
