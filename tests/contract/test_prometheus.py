"""The metrics and the alert rules as Prometheus reads them, checked by the real ``promtool``
(Debian's ``prometheus`` package, installed by ``make promtool``):

- a live worker's ``/metrics`` after an ingest, recalls, a night and an alert round lints clean
  (``promtool check metrics``) and counts what happened;
- the LLM counters over a real OpenAI-compatible server (tests/llm_stub.py) through litellm;
- ``ops/prometheus/rules.yml`` passes ``promtool check rules`` and its unit tests
  (``promtool test rules ops/prometheus/rules_test.yml``), which show every rule firing and not;
- ``ops/prometheus.yml`` passes ``promtool check config`` and compose mounts the rules where it looks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from taskzilla_sleep import __version__
from taskzilla_sleep.app import build
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.llm.base import Unanswered
from taskzilla_sleep.memory.index import build_index, changes_of
from taskzilla_sleep.night.schedule import ScaledClock
from tests.conftest import service_unavailable
from tests.contract.test_llm_litellm import GOOD, answer, belief, distill_request, provider
from tests.http_receiver import Receiver
from tests.llm_stub import LLMStub

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "ops" / "prometheus" / "rules.yml"
RULES_TEST = REPO / "ops" / "prometheus" / "rules_test.yml"
PROMETHEUS_CONFIG = REPO / "ops" / "prometheus.yml"
# The night after the bundled week, 25 min after its first slot: every step's slot has passed, so
# the worker's first tick runs the whole night at once (within misfire_grace_minutes).
CLOCK = datetime.fromisoformat("2026-11-28T03:30:00+01:00")
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        service_unavailable("promtool is not installed: run `make promtool` (Debian's prometheus package)")
    return found


def run_promtool(promtool: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([promtool, *args], input=stdin, capture_output=True, timeout=60, check=False)


def parse(body: str) -> Samples:
    out: Samples = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def lint_clean(promtool: str, body: bytes) -> None:
    done = run_promtool(promtool, "check", "metrics", stdin=body)
    assert (done.returncode, done.stdout + done.stderr) == (0, b""), (done.stdout + done.stderr).decode()


# -- a live worker ----------------------------------------------------------------------------------


def http(url: str, data: Any = None) -> tuple[int, bytes]:
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver]]:
    ok, down = Receiver().start(), Receiver(default=500).start()
    try:
        yield ok, down
    finally:
        ok.stop()
        down.stop()


def test_a_live_worker_scrape_lints_clean_and_counts_what_happened(
    tmp_path: Path, promtool: str, receivers: tuple[Receiver, Receiver]
) -> None:
    ok, down = receivers
    config = tmp_path / "config.yaml"
    hook = {"kind": "webhook", "teams": ["*"]}
    config.write_text(
        yaml.safe_dump(
            {
                "api": {"default_team": "platform"},
                "watchdog": {"enabled": False},
                "alerts": {
                    "nightly_summary": True,
                    "channels": {"ops": hook | {"url_env": "OPS_HOOK"}, "down": hook | {"url_env": "DOWN_HOOK"}},
                },
            }
        )
    )
    settings = load_settings(config, env={"TASKZILLA_DATA_DIR": str(tmp_path / "data")})
    env = {"OPS_HOOK": ok.url("/hook"), "DOWN_HOOK": down.url("/hook")}
    episodes = [json.loads(line) for line in sample_lines() if line.strip()]
    with build(settings) as services:
        worker = Worker(services, ScaledClock(CLOCK, 1.0), serve_api=True, api_port=0, env=env)
        url = worker.start_api()
        assert url is not None
        loop = threading.Thread(target=worker.run, name="worker-loop")
        try:
            status, body = http(url + "/v1/episodes", {"episodes": episodes})
            assert status == 200, body
            stored = json.loads(body)
            for q in ("who owns the billing-api", "how do we release"):
                assert http(url + "/v1/recall?" + urllib.parse.urlencode({"q": q}))[0] == 200
            assert http(url + "/v1/patterns/no-such-pattern")[0] == 404
            assert http(url + "/no/such/path/12345")[0] == 404

            loop.start()  # the first tick: the night (catch-up of 03:05), then the alert round
            wait_for("the night's summary delivered and refused", lambda: bool(ok.succeeded() and down.received()))
            wait_for("the ledger to show the night", lambda: b"last_night_ok 1.0" in http(url + "/metrics")[1])
            # A round's deliveries are counted when the round ends, after the receivers saw its requests.
            counted = (b"alert_deliveries_total{", b"alert_delivery_failures_total{")
            wait_for("the delivery round counted", lambda: all(c in http(url + "/metrics")[1] for c in counted))
            status, scraped = http(url + "/metrics")
            stored_sizes = services.graph.counts("platform").sizes()
            beliefs = services.graph.patterns("platform")
            opened = services.graph.contradictions("platform", "open")
            index = len(build_index(beliefs, settings.memory_index, changes_of(opened, beliefs)))
        finally:
            worker.request_stop()
            if loop.is_alive():
                loop.join(timeout=60)
            else:
                worker._shutdown()  # the loop never started: stop the API it would have stopped
        assert not loop.is_alive()

    assert status == 200
    lint_clean(promtool, scraped)
    m = parse(scraped.decode())
    p = "taskzilla_sleep_"
    assert m[p + "build_info"] == {(("version", __version__),): 1.0}
    assert m["process_cpu_seconds_total"][()] > 0 and m["process_resident_memory_bytes"][()] > 0
    assert m[p + "episodes_ingested_total"][()] == stored["new"] > 0
    skipped = {dict(k)["rule"]: v for k, v in m[p + "episodes_skipped_total"].items()}
    assert skipped == stored["skipped_by_connector"] and set(skipped) == {"chatter", "github"}
    requests = {
        (k[0][1], k[1][1], k[2][1]): v for k, v in m[p + "http_requests_total"].items()
    }  # method, route, status
    assert requests.get(("POST", "/v1/episodes", "200")) == 1, requests
    assert requests[("GET", "/v1/recall", "200")] == 2
    assert requests[("GET", "/v1/patterns/{pattern_id}", "404")] == 1  # the template, not the id
    assert requests[("GET", "unmatched", "404")] == 1
    assert requests[("GET", "/metrics", "200")] >= 1
    assert not any("no-such-pattern" in route or "12345" in route for _, route, _ in requests)
    assert m[p + "recall_duration_seconds_count"][()] == 2
    steps = {dict(k)["step"]: v for k, v in m[p + "step_duration_seconds_count"].items() if dict(k)["status"] == "ok"}
    assert steps == {"prune": 1, "distill": 1, "reflect": 1, "decay": 1}
    assert m[p + "alert_deliveries_total"][(("channel", "ops"), ("channel_kind", "webhook"))] >= 1
    failures = m[p + "alert_delivery_failures_total"]
    assert failures[(("channel", "down"), ("channel_kind", "webhook"), ("outcome", "retry"))] >= 1
    assert m[p + "drift_items_total"][()] == 0
    # The offline provider calls no model: the series the skip-rate rule divides exist, at 0.
    assert m[p + "llm_requests_total"][(("kind", "distill"), ("outcome", "skipped"))] == 0
    # The stores answered, the offline provider needs no model: up, said as such.
    assert m[p + "backend_up"] == {(("store", "graph"),): 1.0, (("store", "vectors"),): 1.0}
    assert m[p + "llm_up"][()] == 1
    # The per-team series (one team here, under metrics.team_labels_max): its live figures and its night.
    team = (("team", "platform"),)
    assert m[p + "team_patterns_live"][team] == stored_sizes["patterns_live"] > 0
    # What the bot loads, read back from MEMORY.md: the entries the night wrote (it read 0 once its
    # parser and the file's format had drifted apart).
    assert m[p + "memory_index_entries"][()] == index > 0
    assert m[p + "team_open_contradictions"][team] == m[p + "open_contradictions"][()]
    assert m[p + "team_last_night_ok"][team] == 1
    assert m[p + "team_last_night_duration_seconds"][team] > 0
    assert m[p + "team_last_night_timestamp_seconds"][team] == m[p + "last_night_timestamp_seconds"][()]
    deferred = m[p + "team_last_night_deferred_groups"]
    assert deferred == {(("step", "distill"), *team): 0.0, (("step", "reflect"), *team): 0.0}
    assert not any(dict(k).get("team") == "other" for fam in m.values() for k in fam)
    # The ledger gauges are in the same scrape.
    assert m[p + "last_night_ok"][()] == 1
    assert m[p + "last_night_steps"][(("kind", "patterns_added"), ("step", "distill"))] >= 1
    assert {dict(k)["percentile"] for k in m.get(p + "pattern_lag_seconds", {})} <= {"50", "95"}


def test_llm_calls_errors_tokens_and_skips_are_counted(promtool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    instruments = Instruments(process=False)
    wrong = answer(belief(support=(7, 8, 9)))
    with LLMStub() as stub:
        llm = provider(stub, instruments=instruments)
        stub.script(429, GOOD)  # one transport error, then an answer
        [first] = llm.distill_many([distill_request("g1")])
        stub.script(wrong, wrong)  # wrong twice: skipped after the corrective retry
        [second] = llm.distill_many([distill_request("g2")])
        prompt_tokens = sum(c.prompt_tokens for c in stub.calls)
    assert not isinstance(first, Unanswered) and isinstance(second, Unanswered)

    body = generate_latest(instruments.registry)
    lint_clean(promtool, body)
    m = parse(body.decode())
    p = "taskzilla_sleep_"
    assert m[p + "llm_calls_total"] == {(("kind", "distill"),): 3.0, (("kind", "reflect"),): 0.0}
    errors = {(dict(k)["kind"], dict(k)["error"]): v for k, v in m[p + "llm_errors_total"].items()}
    assert errors[("distill", "transport")] == 1 and errors[("distill", "invalid_answer")] == 2
    outcomes = {(dict(k)["kind"], dict(k)["outcome"]): v for k, v in m[p + "llm_requests_total"].items()}
    assert outcomes[("distill", "answered")] == 1 and outcomes[("distill", "skipped")] == 1
    assert m[p + "llm_tokens_total"][(("kind", "distill"), ("type", "prompt"))] == prompt_tokens > 0
    assert m[p + "llm_call_duration_seconds_count"][(("kind", "distill"),)] == 3
    assert llm.usage.calls == 3  # the run's own usage is counted as before


# -- the rules and the config -----------------------------------------------------------------------


def test_the_alert_rules_pass_promtool_check(promtool: str) -> None:
    done = run_promtool(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    assert b"SUCCESS: 11 rules found" in done.stdout


def test_the_alert_rules_unit_tests_pass_and_cover_every_rule_firing_and_not(promtool: str) -> None:
    done = run_promtool(promtool, "test", "rules", str(RULES_TEST))
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULES_TEST.read_text())["tests"]:
        jobs = {s["series"].split('job="', 1)[1].split('"', 1)[0] for s in case["input_series"]}
        for check in case["alert_rule_test"]:
            firing = {a["exp_labels"]["job"] for a in check["exp_alerts"]}
            (fired if firing else quiet).add(check["alertname"])
            if jobs - firing:  # another job in the same data, not firing at the same time
                quiet.add(check["alertname"])
    assert fired == rules and quiet == rules


def test_a_rule_that_changed_fails_its_unit_test(promtool: str, tmp_path: Path) -> None:
    # The unit tests are not vacuous: the skip-rate threshold moved from 20% to 50% is caught.
    (tmp_path / "rules.yml").write_text(RULES.read_text().replace("> 0.2\n", "> 0.5\n"))
    shutil.copy(RULES_TEST, tmp_path / "rules_test.yml")
    done = run_promtool(promtool, "test", "rules", str(tmp_path / "rules_test.yml"))
    assert done.returncode == 1 and b"TaskzillaLLMSkipRateHigh" in done.stdout + done.stderr


def test_the_prometheus_config_loads_the_rules_where_compose_mounts_them(promtool: str) -> None:
    done = run_promtool(promtool, "check", "config", str(PROMETHEUS_CONFIG))
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    assert b"SUCCESS: 11 rules found" in done.stdout
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    # TaskzillaWorkerDown watches up{job=...} of the job this config scrapes: renamed in one, not the other,
    # it would watch nothing and absent() would fire for ever.
    (job,) = [c["job_name"] for c in config["scrape_configs"]]
    (down,) = [
        r
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
        if r["alert"] == "TaskzillaWorkerDown"
    ]
    assert down["expr"].count(f'up{{job="{job}"}}') == 2
    (rule_file,) = config["rule_files"]
    assert (PROMETHEUS_CONFIG.parent / rule_file).resolve() == RULES
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = [v.split(":") for v in compose["services"]["prometheus"]["volumes"]]
    targets = {Path(target): Path(source) for source, target, *_ in mounts if source.startswith("./")}
    assert targets[Path("/etc/prometheus/prometheus.yml")] == Path("ops/prometheus.yml")
    assert targets[Path("/etc/prometheus") / rule_file] == Path("ops/prometheus/rules.yml")


def test_every_dashboard_query_parses_as_promql(promtool: str, tmp_path: Path) -> None:
    # promtool parses each query as a recording rule, with Grafana's variables as Grafana fills them.
    dash = json.loads((REPO / "ops" / "grafana" / "taskzilla-sleep.json").read_text())
    fill = {"$__rate_interval": "5m", "$job": ".*", "$instance": ".*", "$team": ".*"}
    rules = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for var, value in fill.items():
                expr = expr.replace(var, value)
            assert "$" not in expr, f"panel {p['title']!r}: an unknown variable in {expr}"
            rules.append({"record": f"dashboard:panel_{p['id']}_{t['refId']}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = run_promtool(promtool, "check", "rules", str(path))
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    assert f"SUCCESS: {len(rules)} rules found".encode() in done.stdout
