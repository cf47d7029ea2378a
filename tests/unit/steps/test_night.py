"""A whole night on the in-memory stores: the runner, the steps in order, the ledger, a dry run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from taskzilla_sleep.core.models import STEP_NAMES, PatternStatus
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, run_night
from taskzilla_sleep.night.steps.distill import DistillPlan
from tests.unit.steps.conftest import DAY, NIGHT, TEAM, Fake, belief_of_all, episode
from tests.unit.steps.test_distill import STATEMENT, rules


def test_a_night_on_the_fake_runs_every_step_in_order_and_records_the_run(fake: Fake, tmp_path: object) -> None:
    fake.settings = fake.settings.model_copy(update={"data_dir": tmp_path})
    fake.add(*rules(), episode("chat", "good morning all", "lea"))
    fake.llm.beliefs = belief_of_all(STATEMENT)
    result = run_night(fake, NightRequest(now=NIGHT, trigger="manual"))
    assert result.ok and [s.step for s in result.run.steps] == list(STEP_NAMES)
    assert [p.status for p in fake.graph.patterns(TEAM)] == [PatternStatus.ACTIVE]
    (stored,) = fake.graph.runs(5)
    assert stored.id == result.run.id and stored.finished_at is not None
    assert stored.steps[1].prompt_ids == ["test-distill"] and stored.steps[0].prompt_ids == []
    assert result.run.pattern_lags_s == [round((NIGHT - DAY).total_seconds(), 3)]
    assert (tmp_path / "memory" / TEAM / "MEMORY.md").exists()  # type: ignore[operator]


def test_a_dry_run_writes_nothing_and_lets_reflect_see_what_distill_would_write(fake: Fake) -> None:
    fake.add(*rules())
    fake.llm.beliefs = belief_of_all(STATEMENT)
    result = run_night(fake, NightRequest(now=NIGHT, dry_run=True))
    (plan,) = result.plans_of(DistillPlan)
    assert len(plan.changes) == 1 and fake.graph.patterns(TEAM) == [] and fake.graph.runs(5) == []
    assert fake.graph.get_meta("last_distill_at:platform") is None


def test_a_failing_step_stops_the_night_and_the_ledger_says_so(fake: Fake, tmp_path: object) -> None:
    fake.settings = fake.settings.model_copy(update={"data_dir": tmp_path})
    fake.add(*rules())

    def broken(_: object) -> object:
        raise RuntimeError("the model is down")

    fake.llm.beliefs = broken  # type: ignore[assignment]
    result = run_night(fake, NightRequest(now=NIGHT + timedelta(hours=1)))
    assert [s.status for s in result.run.steps] == ["ok", "failed", "skipped", "skipped"]
    assert "the model is down" in (result.run.steps[1].error or "")
    assert fake.graph.runs(1)[0].steps[1].status == "failed"


def test_the_drift_repair_runs_inside_the_quiet_hook(fake: Fake) -> None:
    """The worker passes its ingest gate here: an ingest in flight is never repaired as drift."""
    fake.add(episode("chat", "good morning all", "lea"))
    seen: list[str] = []

    @contextmanager
    def quiet() -> Iterator[None]:
        seen.append("enter")
        yield
        seen.append("exit")

    assert run_night(fake, NightRequest(now=NIGHT, trigger="manual"), NightHooks(quiet=quiet)).ok
    assert seen == ["enter", "exit"]
