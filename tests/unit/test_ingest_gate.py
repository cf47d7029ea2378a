"""The ingest gate: a drift repair never sees an ingest between its graph write and its vectors."""

from __future__ import annotations

import threading
import time

from taskzilla_sleep.service.memory_service import IngestGate


def test_quiet_waits_for_ingests_in_flight_and_holds_new_ones_back() -> None:
    gate = IngestGate()
    events: list[str] = []
    started = threading.Event()

    def ingest(name: str, hold_s: float) -> None:
        with gate.running():
            events.append(f"{name} begins")
            started.set()
            time.sleep(hold_s)
            events.append(f"{name} ends")

    first = threading.Thread(target=ingest, args=("first", 0.3))
    first.start()
    started.wait(5)
    second = threading.Thread(target=ingest, args=("second", 0.0))
    with gate.quiet(timeout_s=10):
        events.append("repair begins")
        second.start()  # arrives while the repair looks: it must wait
        time.sleep(0.2)
        events.append("repair ends")
    first.join(5)
    second.join(5)
    assert events == ["first begins", "first ends", "repair begins", "repair ends", "second begins", "second ends"]
    assert gate.busy == 0


def test_quiet_gives_up_waiting_after_its_timeout() -> None:
    gate = IngestGate()
    release = threading.Event()

    def stuck() -> None:
        with gate.running():
            release.wait(5)

    t = threading.Thread(target=stuck)
    t.start()
    while gate.busy == 0:
        time.sleep(0.01)
    began = time.monotonic()
    with gate.quiet(timeout_s=0.2):
        waited = time.monotonic() - began
    release.set()
    t.join(5)
    assert 0.15 <= waited < 2
