"""`taskzilla-sleep status`: store sizes by status, backend health, config in use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.models import Time
from taskzilla_sleep.core.settings import Secrets, Settings
from taskzilla_sleep.runtime.presence import live_workers
from taskzilla_sleep.stores.ports import GraphCounts, GraphStore, VectorStore


class BackendHealth(BaseModel):
    role: str
    backend: str
    where: str
    reachable: bool
    error: str | None = None

    def line(self) -> str:
        """The store's line of ``status`` (and of the demo's summary), aligned with the others."""
        state = "ok" if self.reachable else f"UNREACHABLE: {self.error}"
        return f"{self.role + ':':9} {self.backend} ({self.where}) {state}"


class LeaseInfo(BaseModel):
    """The consolidation lease: who holds it (None: free) and until when unless renewed."""

    name: str
    holder: str | None = None
    expires_at: Time | None = None
    host: str | None = None
    pid: int | None = None


class StatusReport(BaseModel):
    config_files: list[str]
    data_dir: str
    graph: BackendHealth
    vectors: BackendHealth
    graph_counts: GraphCounts | None = None
    vector_counts: dict[str, dict[str, int]] = Field(default_factory=dict)
    workers: list[dict[str, Any]] = Field(default_factory=list)  # live workers of the data dir (presence)
    lease: LeaseInfo | None = None  # None: the graph could not be read
    # Per team, the share of what its last distill showed the judge that the judge does not read (the
    # offline rules read English only): "38 % ... configure a model". Teams with none are left out.
    unread: dict[str, float] = Field(default_factory=dict)
    # The model check (`taskzilla-sleep check`): one tiny call, or none with the offline provider.
    # Not part of ``healthy``: the stores are; `check` exits 1 for the model.
    model: dict[str, Any] | None = None

    @property
    def healthy(self) -> bool:
        return self.graph.reachable and self.vectors.reachable

    def render(self) -> str:
        lines = [
            f"config:   {', '.join(self.config_files)}",
            f"data dir: {self.data_dir}",
        ]
        lines += [f"worker:   pid {w['pid']} on {w.get('host')}, API {w.get('api')}" for w in self.workers]
        lines += [h.line() for h in (self.graph, self.vectors)]
        if self.model is not None:
            fix = f" (fix: {self.model['fix']})" if self.model.get("fix") else ""
            state = self.model["detail"] if self.model["ok"] else f"FAILED: {self.model['detail']}{fix}"
            lines.append(f"model:    {state}")
        if self.lease is not None:
            lines.append(f"lease:    {_render_lease(self.lease)}")
        c = self.graph_counts
        if c is not None:
            lines.append("graph store:")
            lines.append(f"  episodes        {_by_status(c.episodes)}")
            lines.append(f"  patterns        {_by_status(c.patterns)}")
            lines.append(f"  contradictions  {_by_status(c.contradictions)}")
            lines.append(f"  entities {c.entities}, tombstones {c.tombstones}, relationships {c.relationships}")
            lines.append(
                f"  archive         {c.archived_items} items, {c.archived_texts} message texts, "
                f"{_size(c.archived_bytes)} (what `undo` and `patterns release` give back; decay.archive_days)"
            )
        for team, share in sorted(self.unread.items()):
            lines.append(
                f"unread:   {share:.0%} of team {team}'s messages at its last distill are not in a language the "
                "offline judgement reads; configure a model (llm.model)"
            )
        if self.vectors.reachable:
            lines.append("vector store:")
            if not self.vector_counts:
                lines.append("  (empty)")
            for team, kinds in sorted(self.vector_counts.items()):
                lines.append(f"  {team}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        return "\n".join(lines)


def _render_lease(lease: LeaseInfo) -> str:
    if lease.holder is None or lease.expires_at is None:
        return f"{lease.name} free"
    left = (lease.expires_at - datetime.now(UTC)).total_seconds()
    when = f"expires in {left:.0f} s unless renewed" if left > 0 else f"expired {-left:.0f} s ago"
    return f"{lease.name} held by {lease.holder} ({when})"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _by_status(d: dict[str, int]) -> str:
    total = sum(d.values())
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{k} {v}" for k, v in sorted(d.items())) + ")"


def collect_status(
    settings: Settings,
    secrets: Secrets,
    graph: GraphStore | None = None,
    vectors: VectorStore | None = None,
    check_llm: bool = True,
) -> StatusReport:
    """Status of the configured stores; pass stores that are already open to use them (not closed here).
    ``check_llm``: also check the model (``llm.check.check_model``: one tiny call when one is configured)."""
    from taskzilla_sleep.app import build_embedder, build_graph, build_vectors
    from taskzilla_sleep.llm.check import check_model

    owned_graph, owned_vectors = graph is None, vectors is None
    g = settings.graph
    gh = BackendHealth(role="graph", backend=g.backend, where=_graph_where(settings), reachable=False)
    vh = BackendHealth(role="vectors", backend=settings.vector.backend, where=_vector_where(settings), reachable=False)
    report = StatusReport(
        config_files=list(settings.config_files), data_dir=str(settings.data_dir), graph=gh, vectors=vh
    )
    report.workers = live_workers(settings.data_dir)
    if check_llm:
        report.model = check_model(settings.llm).as_dict()
    try:
        try:
            if graph is None:
                graph = build_graph(settings, secrets)
                if graph.backend == "falkordb":
                    # A fresh embedded graph has no key yet and FalkorDB refuses every read of it
                    # ("empty key"): create it, as any other command's first open does.
                    graph.ensure_schema()
            graph.ping()
            report.graph_counts = graph.counts()
            report.lease = _lease(graph)
            report.unread = unread_shares(graph)
            gh.reachable = True
        except StoreError as exc:
            gh.error = str(exc)
        try:
            vectors = vectors or build_vectors(settings, build_embedder(settings), secrets)
            vectors.ping()
            report.vector_counts = {
                team: {"episodes": kinds.get("episodes", 0), "patterns": kinds.get("patterns", 0)}
                for team, kinds in vectors.counts().items()
            }
            vh.reachable = True
        except StoreError as exc:
            vh.error = str(exc)
    finally:
        if owned_vectors and vectors is not None:
            vectors.close()
        if owned_graph and graph is not None:
            graph.close()
    return report


def unread_shares(graph: GraphStore, runs: int = 50) -> dict[str, float]:
    """Per team (of the team jobs among the newest ``runs`` runs), what its last distill could not read."""
    out: dict[str, float] = {}
    for run in graph.runs(runs):  # newest first: the first seen of a team is its last
        step = next((x for x in run.steps if x.step == "distill" and x.counts.get("shown")), None)
        if run.team is None or run.team in out or step is None:
            continue
        out[run.team] = step.counts.get("unread", 0) / step.counts["shown"]
    return {t: v for t, v in out.items() if v > 0}


def _lease(graph: GraphStore) -> LeaseInfo:
    from taskzilla_sleep.runtime.lease import LEASE_NAME

    state = graph.lease_state(LEASE_NAME)
    info = LeaseInfo(name=LEASE_NAME)
    if state is not None and state.holder is not None and state.expires_at_ms > 0:
        info.holder, info.host, info.pid = state.holder, state.host, state.pid
        info.expires_at = datetime.fromtimestamp(state.expires_at_ms / 1000, UTC)
    return info


def _graph_where(s: Settings) -> str:
    if s.graph.backend == "neo4j":
        return f"{s.graph.neo4j_uri} database={s.graph.neo4j_database}"
    return str(s.data_dir / "falkordb")


def _vector_where(s: Settings) -> str:
    if s.vector.backend == "chroma-server":
        v = s.vector
        return f"{'https' if v.ssl else 'http'}://{v.host}:{v.port} (tenant {v.tenant}, database {v.database})"
    return str(s.data_dir / "chroma")
