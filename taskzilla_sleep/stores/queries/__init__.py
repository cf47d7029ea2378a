"""The Cypher the graph store runs, as data: one ``.cypher`` file per aggregate beside this module.

A file holds named blocks, each headed by a line ``// -- name --``; other ``//`` lines are comments
for the reader and are not sent. Every query is written in the Cypher that Neo4j and FalkorDB agree
on: times are epoch milliseconds (FalkorDB has no ``datetime()``), nodes are found by our own
``id``/``key`` property (FalkorDB has no ``elementId()``), no ``EXISTS { }`` subqueries, and writes
are batched with ``UNWIND $rows``. What still differs between the two (schema statements, how a
query is sent, how rows come back) lives in the executors (``stores/neo4j.py``, ``stores/falkordb.py``).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_HEADER = re.compile(r"^// -- ([a-z_]+) --$")


@functools.cache
def load(aggregate: str) -> dict[str, str]:
    """The named queries of ``{aggregate}.cypher``, by name (read once per process)."""
    text = resources.files(__package__).joinpath(f"{aggregate}.cypher").read_text(encoding="utf-8")
    return parse(text, f"{aggregate}.cypher")


def parse(text: str, source: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line.strip())
        if header:
            name = header.group(1)
            if name in out:
                raise ValueError(f"{source}:{n}: query {name!r} is defined twice")
            current = out[name] = []
        elif line.lstrip().startswith("//") or not line.strip():
            continue
        elif current is None:
            raise ValueError(f"{source}:{n}: a query line before the first '// -- name --' header")
        else:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in out.items()}
