"""API keys, passwords and webhook tokens never appear in logs, reports or the stores' files."""

from __future__ import annotations

from pathlib import Path

from tests.contract.test_cycle_litellm import good_model
from tests.e2e.test_cli import ROOT, cli
from tests.llm_stub import LLMStub

SECRETS = {
    "OPENAI_API_KEY": "sk-live-0123456789abcdefSECRET",
    "TASKZILLA_NEO4J_PASSWORD": "neo4j-pass-SECRET-42",
    "TASKZILLA_API_TOKEN": "api-token-SECRET-77",
    "TASKZILLA_CHROMA_TOKEN": "chroma-token-SECRET-99",
    "TEST_HOOK": "http://127.0.0.1:9/hook/T0K3N-SECRET-path",
}


def test_no_secret_in_logs_reports_or_files(tmp_path: Path) -> None:
    data = tmp_path / "d"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("alerts:\n  channels:\n    hook: {kind: webhook, url_env: TEST_HOOK}\n")
    outputs: list[str] = []
    with LLMStub(default=good_model) as stub:
        env = dict(
            SECRETS,
            TASKZILLA_CONFIG=str(cfg),
            TASKZILLA_LOG_LEVEL="debug",
            TASKZILLA__LLM__MODEL="openai/stub",
            TASKZILLA__LLM__API_BASE=stub.url,
        )
        for args in (
            ("ingest", str(ROOT / "taskzilla_sleep/data/sample_week.jsonl"), "--now", "2026-11-27T18:00:00+01:00"),
            ("run-once", "--now", "2026-11-28T03:05:00+01:00"),
            ("run-once", "--now", "2026-11-28T03:05:00+01:00", "--dry-run", "--json"),
            ("report", "--json"),
            ("status", "--json"),
            (
                "status",
                "--set",
                "graph.backend=neo4j",
                "--set",
                "graph.neo4j_uri=bolt://127.0.0.1:1",
                "--set",
                "graph.connect_timeout_s=1",
            ),
        ):
            res = cli(*args, data_dir=data, env=env)
            outputs += [res.stdout, res.stderr]
        sent = [str(r) for r in stub.requests]
    assert any("debug" in o or '"level"' in o for o in outputs)  # the logs were really on
    files = [p for p in data.rglob("*") if p.is_file() and p.stat().st_size < 50_000_000]
    assert any(p.name == "report.html" for p in files)
    blobs = outputs + sent + [p.read_bytes().decode("utf-8", "replace") for p in files]
    for name, value in SECRETS.items():
        leaked = [b[max(0, b.find(value) - 80) : b.find(value) + 40] for b in blobs if value in b]
        assert not leaked, f"{name} leaked: {leaked[:2]}"
