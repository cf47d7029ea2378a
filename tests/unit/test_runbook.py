"""The runbook's 3 am table names only things that exist: each `taskzilla-sleep …` command parses with
the CLI's own parser, each metric (and label) is one the collector exports, each log event is one the
package logs, each setting is a field of Settings. Plus `status`'s lease line, which the table sends
the operator to."""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest

from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.interfaces.cli import make_parser
from taskzilla_sleep.interfaces.status import collect_status
from taskzilla_sleep.observe import metrics
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.memory.vectors import MemoryVectorStore
from taskzilla_sleep.stores.ports import LeaseClaim

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "ops" / "runbook.md"
# The metrics helper renames last_night_step_count; the runbook already cites the new name.
RENAMED = {"last_night_steps": ("step", "kind")}
SYMPTOMS = (
    "readyz 503",
    "stuck lease",
    "LLM down",
    "disk full",
    "Chroma corruption",
    "failed alerts",
    "locked out",
    "rollback",
    "worker down",
    "model unreachable",
)


def table_section() -> str:
    text = RUNBOOK.read_text(encoding="utf-8")
    start = text.index("## At 3 am")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def spans() -> list[str]:
    return re.findall(r"`([^`]+)`", table_section())


def test_the_table_is_first_and_has_every_symptom() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    assert text.index("## At 3 am") == text.index("\n## ") + 1  # the first section
    rows = [ln for ln in table_section().splitlines() if ln.startswith("| ") and not ln.startswith("| symptom")]
    for symptom in SYMPTOMS:
        row = next((r for r in rows if r.startswith(f"| {symptom}")), None)
        assert row is not None, f"no row for {symptom!r}"
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and all(cells), f"{symptom}: a row needs what you see, a first command and a fix"


def commands() -> list[str]:
    return [s for s in spans() if s.startswith("taskzilla-sleep ")]


def test_there_are_commands_to_check() -> None:
    assert len(commands()) >= 10


@pytest.mark.parametrize("command", commands())
def test_every_command_parses(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = shlex.split(command)[1:]
    try:
        make_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{command!r} does not parse: {capsys.readouterr().err.strip()} (exit {exc.code})")


def test_every_metric_and_label_exists() -> None:
    found = re.findall(r"\b(taskzilla_sleep_[a-z_]+)(\{[^}]*\})?", table_section())
    assert len(found) >= 8
    families = {f"{metrics.PREFIX}_{n}": labels for n, (_, labels) in metrics.FAMILIES.items()}
    families |= {f"{metrics.PREFIX}_{n}": labels for n, labels in RENAMED.items()}
    for family in Instruments(process=False).registry.collect():  # the process's own counters
        labels = tuple(sorted({k for s in family.samples for k in s.labels}))
        families |= {family.name: labels, f"{family.name}_total": labels}
    for name, labels in found:
        assert name in families, f"the runbook cites {name}, which metrics.py does not export"
        for label in re.findall(r"(\w+)=", labels):
            assert label in families[name], f"{name} has no label {label!r} (it has {families[name]})"


def test_every_log_event_is_logged() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "taskzilla_sleep").rglob("*.py"))
    events = [s for s in spans() if re.fullmatch(r"[a-z]+(?:_[a-z]+)+", s) and not s.startswith("taskzilla_sleep")]
    assert {"step_failed", "lease_busy", "alert_gave_up"} <= set(events)
    for event in events:
        assert f'"{event}"' in source, f"the runbook cites {event!r}, which no module logs or names"


def test_every_setting_exists() -> None:
    keys = [s for s in spans() if re.fullmatch(r"[a-z]+\.[a-z_]+", s)]
    assert len(keys) >= 4
    for key in keys:
        section, _, field = key.partition(".")
        assert section in Settings.model_fields, key
        sub = Settings.model_fields[section].annotation
        assert field in sub.model_fields, f"the runbook cites {key}, which is not a setting"  # type: ignore[union-attr]


def test_status_names_the_lease_holder(tmp_path: Path) -> None:
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    settings = Settings(data_dir=tmp_path)
    free = collect_status(settings, Secrets(), graph, vectors)
    assert free.lease is not None and free.lease.holder is None
    assert "lease:    consolidation free" in free.render()

    claim = LeaseClaim("worker@box:4242:abcd", "box", None, 4242)
    now_ms = int(time.time() * 1000)
    assert graph.try_lease("consolidation", claim, now_ms, 120_000, None)
    held = collect_status(settings, Secrets(), graph, vectors)
    assert held.lease is not None and held.lease.holder == "worker@box:4242:abcd" and held.lease.pid == 4242
    line = next(ln for ln in held.render().splitlines() if ln.startswith("lease:"))
    assert re.fullmatch(
        r"lease:    consolidation held by worker@box:4242:abcd \(expires in 1[12]\d s unless renewed\)", line
    )
    assert held.model_dump(mode="json")["lease"]["expires_at"].endswith("Z")
