"""A night's job state read from a real ledger (``NightJobs.read`` over ``graph.slot_runs``) is the
state the pipeline reported to it as it saved the runs: done, in flight, left, deferred, on every
backend (the in-memory fake, FalkorDB, Neo4j)."""

from __future__ import annotations

from taskzilla_sleep.night.jobs import NightJobs
from taskzilla_sleep.stores.ports import GraphStore
from tests.unit.test_night_jobs import SLOT, TEAMS, job


def test_a_nights_jobs_read_from_the_ledger_answer_as_the_pipelines_reports_did(graph_store: GraphStore) -> None:
    runs = [
        job("alpha", {"prune": "ok", "distill": "failed"}, counts={"distill": {"deferred_groups": 3}}),
        job(
            "alpha",
            {"distill": "deferred", "reflect": "ok"},
            at=20,
            counts={"distill": {"deferred_groups": 2}},
            deferred={"distill": ["alpha: 2 group(s) deferred (budget: calls)"]},
        ),
        job("beta", {"prune": "ok", "distill": "running", "reflect": "pending"}, at=1, finished=False),
        job("beta", {"prune": "ok"}, at=2, slot="2026-11-29"),  # another night: not this one's
    ]
    reported = NightJobs(SLOT, [], TEAMS)
    for r in runs:
        graph_store.save_run(r)
        if r.slot == SLOT:
            reported.report(r)
    read = NightJobs.read(graph_store, SLOT, TEAMS)
    alpha = NightJobs.read(graph_store, SLOT, ["alpha"])  # under a team's lease: only its runs read
    for jobs in (reported, read):
        assert [jobs.done(t) for t in TEAMS] == [["prune", "distill", "reflect"], ["prune"]]
        assert [jobs.in_flight(t) for t in TEAMS] == [[], ["distill", "reflect"]]
        assert jobs.deferred() == ["distill alpha: 2 group(s) deferred (budget: calls)"]
        assert jobs.deferred_groups("distill") == 2
        assert jobs.open and not jobs.complete
    assert [r.id for r in read.runs] == [r.id for r in reported.runs]
    assert alpha.left("alpha") == ["decay"] and {r.team for r in alpha.runs} == {"alpha"}
