"""Memory a person can inspect, export and forget: plain functions over the store ports.

``inspection`` reads (list and show patterns), ``forget`` removes what a person asks to forget from
both stores, ``transfer`` writes a team's whole memory as JSONL (the file: ``export_file``) and reads
it back into any backend, or as another team (``team_copy``).
The CLI calls them; so can the HTTP API and an MCP server: ``(graph, vectors, team, ...) -> model``.
"""

from __future__ import annotations

from taskzilla_sleep.memory.admin.forget import ForgetReport, forget_author, forget_episode, forget_pattern
from taskzilla_sleep.memory.admin.inspection import (
    PatternDetail,
    PatternSummary,
    list_patterns,
    show_pattern,
)
from taskzilla_sleep.memory.admin.transfer import ImportReport, export_team, import_team

__all__ = [
    "ForgetReport",
    "ImportReport",
    "PatternDetail",
    "PatternSummary",
    "export_team",
    "forget_author",
    "forget_episode",
    "forget_pattern",
    "import_team",
    "list_patterns",
    "show_pattern",
]
