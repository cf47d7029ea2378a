"""The ops report after five replayed nights, as an operator sees it: text, JSON and the HTML page in a browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tests.e2e.test_cli import cli

NIGHTS = [
    "2026-11-29T03:05:00+01:00",
    "2026-11-30T03:05:00+01:00",
    "2026-12-01T03:05:00+01:00",
    "2026-12-02T03:05:00+01:00",
]

ROW = re.compile(r"^  20\d\d-\d\d-\d\d 0[23]:05  (demo|manual) ", re.M)  # 03:05 Amsterdam = 02:05 UTC


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's night, then four more nights one day apart on the same data dir."""
    data = tmp_path_factory.mktemp("report")
    res = cli("demo", data_dir=data)
    assert res.returncode == 0, res.stderr[-3000:]
    for night in NIGHTS:
        res = cli("run-once", "--now", night, data_dir=data)
        assert res.returncode == 0, res.stderr[-3000:]
    return data


def report(data: Path, as_json: bool, html: Path) -> subprocess.CompletedProcess[str]:
    """`taskzilla-sleep report --runs 10` with the HTML page at ``html``, times in Amsterdam."""
    flags = ["--json"] if as_json else []
    return cli(
        "report",
        "--runs",
        "10",
        "--html",
        str(html),
        *flags,
        data_dir=data,
        env={"TASKZILLA__SCHEDULE__TIMEZONE": "Europe/Amsterdam"},
        timeout=120,
    )


def assert_trend_view(text: str) -> None:
    # The CLI may show the schedule's zone or UTC; either way the same five nights.
    assert re.search(
        r"taskzilla-sleep report: 5 runs \(2026-11-28 … 2026-12-02\), times in (Europe/Amsterdam|UTC)", text
    )
    table = text.split("what each night did")[1].split("\n\n")[0]
    assert len(ROW.findall(table)) == 5
    assert re.search(r"^  live episode vectors +[▁▂▃▄▅▆▇█]{5}  52 → 43", text, re.M)  # decay after 72 h
    assert re.search(r"^  patterns added +█▁▁▁▁ ", text, re.M)  # the demo night distilled, the rest had nothing new
    assert re.search(r"\[ok +\] pinned facts touched = 0 +all 1 pinned facts intact", text)
    assert re.search(r"\[ok +\] failed steps = 0 +0 failed of 20 steps in 5 runs", text)
    assert re.search(r"\[ok +\] open contradictions not piling up +1 open", text)


def test_report_after_five_nights(replayed: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    res = report(replayed, False, html)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert_trend_view(res.stdout)
    assert "times in Europe/Amsterdam" in res.stdout and "2026-12-02 03:05  manual" in res.stdout
    assert res.stdout.rstrip().endswith(f"charts: {html}")
    assert html.read_text(encoding="utf-8").count("<svg") == 8  # incl. the memory index size chart

    res = report(replayed, True, tmp_path / "again.html")
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(res.stdout)
    assert [n["trigger"] for n in data["nights"]] == ["demo", "manual", "manual", "manual", "manual"]
    assert data["nights"][0]["patterns_added"] >= 3 and data["nights"][3]["retired"] >= 9
    signals = {s["name"]: s for s in data["signals"]}
    assert signals["memory_index"]["verdict"] == "ok"  # the ledger records the index size every night
    assert data["memory_index_sizes"] and all(1 <= n <= 50 for n in data["memory_index_sizes"])


def test_report_command_line(replayed: Path) -> None:
    res = cli("report", "--runs", "10", data_dir=replayed)
    assert res.returncode == 0, res.stderr[-3000:]
    assert_trend_view(res.stdout)
    charts = Path(res.stdout.rstrip().rsplit("charts: ", 1)[1])
    assert charts.read_text(encoding="utf-8").count("<svg") == 8  # incl. the memory index size chart
    res = cli("report", "--runs", "2", "--json", data_dir=replayed)
    assert res.returncode == 0 and len(json.loads(res.stdout)["nights"]) == 2


def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        service_unavailable("chromium is not installed (Debian package `chromium`)")
    return found


def screenshot(browser: str, page: Path, out: Path, profile: Path, size: str = "1280,2000") -> str:
    """Render ``page`` headless, offline, and return what Chromium logged (console messages included)."""
    res = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={profile}",
            f"--screenshot={out}",
            f"--window-size={size}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout + res.stderr


def console_lines(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def png_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct bytes in the pixel data): enough to tell a real page from a blank one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_html_report_renders_in_headless_chromium(replayed: Path, tmp_path: Path) -> None:
    browser = chromium()
    # The console check must be able to fail: a page with a script error shows up in the log.
    canary = tmp_path / "canary.html"
    canary.write_text('<!DOCTYPE html><html><body><script>console.error("canary")</script></body></html>')
    assert console_lines(screenshot(browser, canary, tmp_path / "canary.png", tmp_path / "p0", "400,300"))

    html = tmp_path / "report.html"
    assert report(replayed, False, html).returncode == 0
    shot = Path(os.environ.get("TASKZILLA_REPORT_SCREENSHOT", str(tmp_path / "report.png")))
    log = screenshot(browser, html, shot, tmp_path / "p1")
    assert console_lines(log) == []
    assert shot.stat().st_size > 50_000
    width, height, distinct = png_facts(shot)
    assert (width, height) == (1280, 2000)
    assert distinct > 50  # charts, text and colours, not one flat colour
