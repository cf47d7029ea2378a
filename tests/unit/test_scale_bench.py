"""The scale bench's own definitions (ops/bench/scale_parts.py): the team mix and what it reads from
the ledger (night wall time, teams done, each step ok exactly once, deferred steps)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

from ops.bench.scale_parts import cpu_s, night_figures, rss_mb, team_mix, teams_done
from taskzilla_sleep.core.models import Run, StepResult

STEPS = ("prune", "distill", "reflect", "decay")
T0 = datetime.fromisoformat("2026-11-28T03:05:00+01:00")


def job(team: str, start_s: float, statuses: dict[str, str], calls: int = 0) -> Run:
    steps, at = [], T0 + timedelta(seconds=start_s)
    for step, status in statuses.items():
        end = at + timedelta(seconds=2)
        deferred = ["2 groups: the window ended"] if status == "deferred" else []
        steps.append(
            StepResult(step=step, status=status, started_at=at, finished_at=end, llm_calls=calls, deferred=deferred)  # type: ignore[arg-type]
        )
        at = end
    return Run(id=f"{team}-{start_s}", trigger="schedule", started_at=T0, now=T0, steps=steps, slot="x", team=team)


def test_the_mix_has_a_few_busy_teams_and_mostly_quiet_ones_in_a_seeded_order() -> None:
    mix = team_mix(500, seed=7)
    tiers = list(mix.values())
    assert (tiers.count("busy"), tiers.count("medium"), tiers.count("quiet")) == (10, 90, 400)
    assert tiers[:10] != ["busy"] * 10 and mix == team_mix(500, seed=7) != team_mix(500, seed=8)
    assert list(team_mix(3, seed=7).values()).count("busy") == 1  # at least one busy team
    with pytest.raises(ValueError, match="at least 1"):
        team_mix(0, seed=7)


def test_night_figures_over_the_ledger() -> None:
    ok = dict.fromkeys(STEPS, "ok")
    runs = [
        job("a", 0, ok, calls=3),
        # b's first job died mid-distill (abandoned); another replica finished it from distill on
        job("b", 1, {"prune": "ok", "distill": "abandoned", "reflect": "skipped", "decay": "skipped"}),
        job("b", 30, {"distill": "ok", "reflect": "ok", "decay": "ok"}, calls=1),
        job("c", 5, {"prune": "ok", "distill": "deferred", "reflect": "ok", "decay": "ok"}),
    ]
    mix = {"a": "busy", "b": "quiet", "c": "quiet", "d": "quiet"}  # d: not started
    f = night_figures(runs, mix, STEPS)
    assert f["wall_s"] == 36.0  # a's prune at 0 s .. b's decay ending at 30 + 3 x 2 s
    assert f["teams_done"] == 3 and teams_done(runs, STEPS) == {"a", "b", "c"}
    assert f["teams_every_step_ok_once"] == 2 and f["not_once"] == ["c", "d"]  # c's distill deferred
    assert f["abandoned"] == 1 and f["deferred_steps"] == 1 and "the window ended" in f["deferred"][0]
    assert f["tiers"]["busy"] == {
        "teams": 1, "job_wall_s_median": 8.0, "job_wall_s_max": 8.0,
        "llm_calls_median": 12, "llm_calls_total": 12, "tokens_total": 0,
    }  # fmt: skip
    assert f["tiers"]["quiet"]["teams"] == 3 and f["tiers"]["quiet"]["llm_calls_total"] == 3


def test_process_figures_from_proc() -> None:
    assert (cpu_s(os.getpid()) or 0) > 0 and (rss_mb(os.getpid()) or 0) > 10
    assert cpu_s(2**22 + 1) is None and rss_mb(2**22 + 1) is None  # above pid_max: no such process
