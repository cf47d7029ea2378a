"""Parameters a graph backend cannot carry are refused before a query is sent, identically on both.

FalkorDB's client inlines parameters into the query text: NUL cuts the query short, NaN/inf are not
Cypher, an integer beyond 64 bits is silently clamped; no backend can encode a lone surrogate
(JSON's "\\ud800" escapes allow one). Neo4j would take some of these; refusing them there too keeps
one behaviour, whichever backend a deployment runs.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.models import unstorable

_INT64 = (-(2**63), 2**63 - 1)
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")  # as models.unstorable, for the fast pass


def refuse_unstorable(backend: str, params: dict[str, Any] | None) -> None:
    """Raise StoreError naming the first parameter ``backend`` cannot carry (nothing is sent)."""
    if params and _suspect(params):
        why = _unstorable_value(params, "")
        if why is not None:
            raise StoreError(f"{backend}: refused to send parameter {why}; the query was not sent")


def _suspect(v: object) -> bool:
    """The fast pass (every batch goes through it): could anything in ``v`` be unstorable?"""
    if type(v) is str:
        return _BAD_CHAR.search(v) is not None
    if type(v) is dict:
        return any(type(k) is not str or _BAD_CHAR.search(k) is not None or _suspect(x) for k, x in v.items())
    if type(v) is list or type(v) is tuple:
        return any(_suspect(x) for x in v)
    if type(v) is int:
        return not _INT64[0] <= v <= _INT64[1]
    if type(v) is float:
        return not math.isfinite(v)
    return not (v is None or type(v) is bool)


def _unstorable_value(v: object, path: str) -> str | None:
    """The slow pass, once the fast one found something: which parameter, and why."""
    if isinstance(v, str):
        why = unstorable(v)
        return f"'{path}': {why}" if why else None
    if isinstance(v, bool):
        return None
    if isinstance(v, numbers.Integral):
        return None if _INT64[0] <= int(v) <= _INT64[1] else f"'{path}': an integer beyond 64 bits"
    if isinstance(v, float):
        return None if math.isfinite(v) else f"'{path}': {v} is not a finite number"
    if isinstance(v, bytes | bytearray):
        return f"'{path}': bytes are not a graph value"
    if isinstance(v, Mapping):
        for k, x in v.items():
            key = str(k)
            inner = f"{path}.{key}" if path else key
            why = unstorable(key)
            found = f"'{path}': the key {key!r}: {why}" if why else _unstorable_value(x, inner)
            if found:
                return found
        return None
    if isinstance(v, list | tuple):
        for i, x in enumerate(v):
            found = _unstorable_value(x, f"{path}[{i}]")
            if found:
                return found
    return None  # anything else is the driver's to convert (or refuse)
