"""Schemathesis against the worker's own OpenAPI schema, on real embedded stores: no 5xx, and every
response conforms to the schema where the schema documents it.

Bounded and deterministic: a fixed number of examples per operation (valid and invalid input
both), Hypothesis derandomized, no example database; it runs in well under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings, strategies
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from taskzilla_sleep.app import build
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.api import create_app
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock

EXAMPLES_PER_OPERATION = 50
NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
# Every status an operation can answer is documented, each with the one error shape.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    negative_data_rejection,
]


@pytest.fixture(scope="module", params=[None, "fuzz-token"], ids=["open", "token"])
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    """Without a token every handler sees the fuzzed input; with one, the fuzzed Authorization
    headers meet the token check (and the write endpoints answer 401)."""
    data = tmp_path_factory.mktemp("fuzz")
    with build(
        load_settings(env={"TASKZILLA_DATA_DIR": str(data)}, overrides={"api.default_team": "platform"})
    ) as services:
        services.ingestor(clock=lambda: NOW).ingest_lines(sample_lines(), "sample")
        # Wired as the worker wires its API (status, metrics and ingest are the worker's own).
        worker = Worker(services, ScaledClock(NOW, 1.0), api_token=request.param, serve_api=False, env={})
        deps = worker.api_deps()
        yield create_app(deps)


def test_fuzzed_api_never_answers_5xx_and_matches_its_schema(app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8  # every endpoint of the API is in the schema
    for op in operations:
        cases = strategies.one_of(*(op.as_strategy(generation_mode=mode) for mode in GenerationMode))

        @given(case=cases)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS)

        try:
            fuzz()
        except (AssertionError, BaseExceptionGroup) as exc:  # schemathesis raises a group of check failures
            failures.append(f"{op.label}: {exc}")
        except Exception as exc:  # a server-side exception re-raised by the ASGI test transport: a 500
            failures.append(f"{op.label}: 500 ({type(exc).__name__}: {exc})")
    assert not failures, "\n\n".join(failures)
