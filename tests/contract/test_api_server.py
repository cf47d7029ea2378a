"""The API over a real socket (uvicorn in the worker): a large ingest does not stall the probes."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from taskzilla_sleep.app import build
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.interfaces.worker import Worker
from taskzilla_sleep.night.schedule import ScaledClock

NOW = datetime.fromisoformat("2026-11-28T09:00:00+01:00")
EPISODES = 1500  # the benchmark uses 5,000; enough here to keep the ingest busy for seconds


def test_healthz_and_metrics_answer_while_a_large_ingest_is_in_flight(tmp_path: Path) -> None:
    settings = load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)}, overrides={"api.default_team": "platform"})
    with build(settings) as services:
        worker = Worker(services, ScaledClock(NOW, 0.0), serve_api=True, api_port=0, env={})
        url = worker.start_api()
        assert url is not None
        try:
            eps = [
                {
                    "team": "platform",
                    "channel": f"c{i % 7}",
                    "author": f"p{i % 31}",
                    "text": f"message number {i} about the release train and the staging soak",
                    "ts": "2026-11-28T08:00:00+01:00",
                    "provenance": "human",
                }
                for i in range(EPISODES)
            ]
            data = json.dumps({"episodes": eps}).encode()
            answer: dict[str, object] = {}

            def ingest() -> None:
                req = urllib.request.Request(
                    url + "/v1/episodes", data=data, method="POST", headers={"content-type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=300) as r:
                    answer.update(json.loads(r.read()))

            t = threading.Thread(target=ingest)
            t.start()
            probes: list[float] = []
            while t.is_alive() and len(probes) < 200:
                for path in ("/healthz", "/metrics"):
                    started = time.monotonic()
                    with urllib.request.urlopen(url + path, timeout=30) as r:
                        assert r.status == 200
                    probes.append(time.monotonic() - started)
                time.sleep(0.05)
            t.join(timeout=300)
            assert answer.get("new") == EPISODES
            assert len(probes) >= 4, "the ingest finished before the probes could run"
            # Loose on a shared 2-core machine (the benchmark measures the median): never seconds.
            assert max(probes) < 2.0, probes
            assert worker.gate.busy == 0
        finally:
            worker._server.should_exit = True
            if worker._api_thread is not None:
                worker._api_thread.join(timeout=10)
