"""The progress helper every long command uses: its modes, its rate limit, its terminal line, its flags."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator

import pytest

from taskzilla_sleep.night.progress import Progress, add_flags, choose


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def events(text: str) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in text.splitlines()]


def test_auto_is_a_bar_on_a_terminal_and_json_elsewhere() -> None:
    assert choose("auto", FakeTty()) == "bar"
    assert choose(None, FakeTty()) == "bar"
    assert choose("auto", io.StringIO()) == "json"
    assert choose("json", FakeTty()) == "json"
    assert choose("bar", io.StringIO()) == "bar"
    assert choose("off", FakeTty()) == "off"
    with pytest.raises(ValueError, match="'loud' is not one of auto, bar, json, off"):
        choose("loud", io.StringIO())


def test_json_events_are_at_most_one_a_second_plus_phase_starts_and_the_final_one() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("import", "json", stream=out, clock=clock)
    p.update(0, 10, phase="graph", unit="items")  # the first: shown
    for t, done in ((0.3, 2), (0.6, 4), (0.99, 5), (1.0, 6), (1.5, 8), (2.1, 10)):
        clock.t = 100.0 + t
        p.update(done)
    clock.t = 102.2
    p.update(0, 4, phase="vectors", unit="vectors")  # a new phase: shown at once
    clock.t = 102.5
    p.advance(4)  # 0.3 s later: held back
    p.finish({"vectors": 4}, "done")
    got = events(out.getvalue())
    assert [(e["phase"], e["done"], e["total"], e["elapsed_s"]) for e in got] == [
        ("graph", 0, 10, 0.0),
        ("graph", 6, 10, 1.0),
        ("graph", 10, 10, 2.1),
        ("vectors", 0, 4, 2.2),
        ("vectors", 4, 4, 2.5),
    ]
    assert all(e["event"] == "progress" and e["command"] == "import" for e in got)
    assert got[-1]["final"] is True and got[-1]["totals"] == {"vectors": 4}
    assert "final" not in got[-2] and got[-2]["unit"] == "vectors"
    assert p.phases_done == ["graph", "vectors"]


def test_the_terminal_line_is_rewritten_in_place_with_notes_kept_above_it() -> None:
    out, clock = FakeTty(), Clock()
    p = Progress("ingest", "bar", label="ingest f", stream=out, clock=clock)
    p.update(0, 8, phase="embed", unit="vectors", note="8 new episodes stored")
    clock.t += 0.05
    p.update(2)  # within 0.1 s of the last redraw: not drawn
    clock.t += 0.15
    p.update(4)
    clock.t += 1.0
    p.finish({}, "done in 1.2 s")
    assert out.getvalue() == (
        "ingest f: 8 new episodes stored\n"
        "\ringest f: embed [------------------------]   0% 0/8 vectors 0.0 s\x1b[K"
        "\ringest f: embed [############------------]  50% 4/8 vectors 0.2 s\x1b[K"
        "\r\x1b[Kingest f: done in 1.2 s\n"
    )


def test_a_count_without_a_total_and_clearing_before_a_message() -> None:
    out, clock = FakeTty(), Clock()
    p = Progress("reconcile", "bar", stream=out, clock=clock)
    p.update(3, 0, phase="check", unit="collections")
    assert out.getvalue() == "\rreconcile: check 3 collections 0.0 s\x1b[K"
    p.clear()
    p.clear()  # twice: nothing more
    assert out.getvalue().endswith("\x1b[K\r\x1b[K")
    with p, pytest.raises(RuntimeError):  # an error leaves the terminal line clean for its message
        p.update(4)
        raise RuntimeError
    assert out.getvalue().endswith("\r\x1b[K")


def test_off_writes_nothing_but_still_knows_where_it_is() -> None:
    out = FakeTty()
    p = Progress("run-once", "off", stream=out)
    p.update(1, 4, phase="distill", unit="steps", note="step 2/4")
    p.finish({"steps": 4}, "done", done=4)
    assert out.getvalue() == ""
    assert (p.phase, p.done, p.total, p.phases_done) == ("distill", 4, 4, ["distill"])


@pytest.fixture
def parser() -> Iterator[argparse.ArgumentParser]:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    add_flags(p)
    yield p


def test_the_flags_are_the_same_on_every_command(parser: argparse.ArgumentParser) -> None:
    assert parser.parse_args(["f"]).progress is None  # auto
    assert parser.parse_args(["f", "--progress"]).progress == "auto"
    assert parser.parse_args(["f", "--progress", "json"]).progress == "json"
    assert parser.parse_args(["--progress=bar", "f"]).progress == "bar"
    assert parser.parse_args(["f", "--no-progress"]).progress == "off"


def test_conflicting_or_unknown_flags_are_usage_errors(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["f", "--progress", "--no-progress"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["f", "--progress", "loud"])
    assert exc.value.code == 2 and "invalid choice: 'loud'" in capsys.readouterr().err
