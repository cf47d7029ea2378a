"""The long-running worker: the nightly chain at its slots, the watchdog, alerts, and the HTTP API
(with the MCP server at ``/mcp``).

One loop in the main thread decides what to do; the API is served by uvicorn in a thread. A night
is a set of team jobs (``nights.py``): each replica claims a team under the team's lease in the graph
store, runs the team's steps that are due (each at or after its slot, in cycle order), records them in
the ledger (one run per job, with its slot and team) and releases the team, so replicas share a night
and each team's step runs once. Up to ``worker.team_concurrency`` jobs run at once in one process
(sharing one LLM client and its concurrency bound). A watchdog distill holds the same team lease.

Shutdown: the first SIGTERM/SIGINT stops new work; the step in flight finishes its current batch
(or is abandoned between batches), the ledger is recorded, the lease released, child processes
stopped, exit 0. If that takes longer than ``worker.shutdown_grace_s``, or on a second signal,
the process exits at once: every write is atomic and a rerun repairs the rest.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Collection
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

import structlog

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.errors import ConfigError
from taskzilla_sleep.core.host import holder_id
from taskzilla_sleep.core.models import Run, RunTrigger, StepName, iso_time
from taskzilla_sleep.llm.check import CachedModelCheck
from taskzilla_sleep.memory.index import index_entries
from taskzilla_sleep.night.budget import Tallies
from taskzilla_sleep.night.jobs import NightJobs, TeamJob
from taskzilla_sleep.night.ledger import group_nights, merge_runs, next_slot, night_key, night_status, run_status
from taskzilla_sleep.night.pipeline import NightHooks, NightRequest, NightResult, run_night, teams_sizes
from taskzilla_sleep.night.schedule import Clock, NightlySchedule
from taskzilla_sleep.night.watchdog import WatchdogPass, watchdog_pass
from taskzilla_sleep.rules.access import Tokens
from taskzilla_sleep.runtime import presence
from taskzilla_sleep.runtime.handover import BusyLeases, run_teams, wake_timer
from taskzilla_sleep.runtime.lease import LEASE_NAME, Lease, exclusive, holding, live_holder, team_lease_name
from taskzilla_sleep.service.memory_service import IngestGate, MemoryService

if TYPE_CHECKING:
    from taskzilla_sleep.interfaces.api import ApiDeps

log = structlog.get_logger(__name__)
INGEST_WAIT_S = 120.0  # how long consolidation waits for ingests in flight before it starts anyway
FORGET_WAIT_S = 30.0  # how long a forget over the API waits for a running night before answering 429


class Worker:
    def __init__(
        self,
        services: Services,
        clock: Clock,
        api_token: str | None = None,
        serve_api: bool = True,
        api_port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.services = services
        self.settings = services.settings
        self.clock = clock
        self.schedule = NightlySchedule(self.settings.schedule)
        self.lease = Lease(services.graph, LEASE_NAME, self.settings.worker.lease_ttl_s, me=holder_id("worker"))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._signals = 0
        self._api_token = api_token
        self._serve_api = serve_api
        self._api_port = self.settings.api.port if api_port is None else api_port
        self._server: Any = None
        self._api_thread: threading.Thread | None = None
        self._missed_logged: set[str] = set()
        self._complete: set[str] = set()  # nights every team finished (no need to read the ledger again)
        self._tallies = Tallies()  # per scheduled night: the LLM spending its jobs here share
        self._busy = BusyLeases()  # this pass's teams another replica held: look again when they expire
        self._env = dict(os.environ if env is None else env)
        self.ingestor = services.ingestor(clock=self.clock.now)
        self.gate = IngestGate()
        self.memory = MemoryService(
            self.settings,
            services.graph,
            services.vectors,
            self.ingestor,
            self.clock.now,
            on_ingest=self._wake.set,
            gate=self.gate,
            exclusive=lambda: exclusive(services.graph, self.settings.worker.lease_ttl_s, "api", FORGET_WAIT_S),
            instruments=services.instruments,
            recall_pool=services.recall_pool,
        )
        self.port: int | None = None
        self._started_at = clock.now()  # a night whose slot passed before this is a catch-up
        self._metrics_registry: Any = None
        self._metrics_lock = threading.Lock()  # two first scrapes at once must not register twice
        self._outbox: Any = None
        self._senders: dict[str, Any] = {}
        self._open_alerts()
        # The model asked one tiny question at start, then by the loop again when the verdict is stale
        # (llm.check): /readyz, /v1/status and the llm_up gauge read the last verdict, never call the model.
        self.llm_check = CachedModelCheck(self.settings.llm)

    # -- life cycle ---------------------------------------------------------------------------------
    def run(self) -> int:
        """The loop, until a signal or request_stop(). Call start_api() first to serve the API."""
        self._install_signals()
        log.info("worker_started", holder=self.lease.me, api_port=self.port, clock=self.clock.now().isoformat())
        # A wrong model or a missing key is said now, at error level, not at 03:10; the worker runs on
        # (the night retries, and the store work and the API need no model).
        self.llm_check.current()
        first = True
        try:
            while not self._stop.is_set():
                self._tick(first)
                first = False
                self._sleep_until_next()
        finally:
            self._shutdown()
        log.info("worker_stopped", holder=self.lease.me)
        return 0

    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # embedded in a test or another program: the owner calls request_stop()

        def handler(signum: int, _frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                log.warning("worker_killed", signal=signum, reason="second signal")
                os._exit(130)  # at once; the FalkorDB child dies with us (parent-death signal)
            log.info("worker_stopping", signal=signum, grace_s=self.settings.worker.shutdown_grace_s)
            self.request_stop()
            timer = threading.Timer(self.settings.worker.shutdown_grace_s, self._grace_expired)
            timer.daemon = True
            timer.start()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def _grace_expired(self) -> None:
        log.error("worker_grace_expired", grace_s=self.settings.worker.shutdown_grace_s)
        os._exit(1)

    def _shutdown(self) -> None:
        if self._senders:
            from taskzilla_sleep.alerts.senders import close_senders

            close_senders(self._senders)
        if self._outbox is not None:
            self._outbox.close()
        if self._server is not None:
            self._server.should_exit = True
            if self._api_thread is not None:
                self._api_thread.join(timeout=10)
            presence.withdraw(self.settings.data_dir)
        self.lease.release()

    # -- the loop ---------------------------------------------------------------------------------
    def _tick(self, first: bool) -> None:
        now = self.clock.now()
        night = self.schedule.last_night(now)
        key = self.schedule.key(night)
        self._busy.clear()
        if key not in self._complete:
            late = now - night
            catch_up = first and self.settings.worker.catch_up
            if catch_up or late <= self.schedule.misfire_grace:
                self._night(night, key, "catch-up" if night < self._started_at else "schedule")
            elif key not in self._missed_logged:
                self._missed_logged.add(key)
                _, complete = self._jobs(night, key)
                if not complete:
                    log.warning("night_missed", slot=key, late_s=round(late.total_seconds()))
        if not self._stop.is_set() and self.settings.watchdog.enabled:
            self._watchdog()
        if not self._stop.is_set():
            self._alerts()
        if not self._stop.is_set():
            self.llm_check.current()  # again only once the verdict is stale (llm.check: 10 min ok, 1 min not)

    def _sleep_until_next(self) -> None:
        if self._stop.is_set():
            return
        now = self.clock.now()
        wake_at = min(self.schedule.next_night(now), now + timedelta(seconds=self.settings.worker.poll_s))
        night = self.schedule.last_night(now)
        step_at = next_slot(lambda step: self.schedule.step_slot(night, step), now)
        open_night = self.schedule.key(night) not in self._complete
        if step_at is not None and open_night:
            wake_at = min(wake_at, step_at)  # a team's next step is due at its slot, not a poll later
        self._wake.clear()
        # A team another replica held: look again once its lease expires (a dead holder's team is ours then).
        busy = self._busy
        timer = (
            wake_timer(busy.wake_in(time.time(), self.settings.worker.poll_s), self._wake, busy.local_pids())
            if open_night
            else None
        )
        try:
            self.clock.sleep((wake_at - now).total_seconds(), self._wake)
        finally:
            if timer is not None:
                timer.cancel()

    def _quiet(self) -> AbstractContextManager[None]:
        return self.gate.quiet(INGEST_WAIT_S)

    def _claim(self, team: str, what: str) -> Lease | None:
        """Team ``team``'s lease, taken; None when another replica works on the team or whole-memory work
        (run-once, an import, a forget) holds the consolidation lease (it waits for team jobs to end)."""
        lease = Lease(self.services.graph, team_lease_name(team), self.settings.worker.lease_ttl_s, holder_id("worker"))
        if not lease.try_acquire():
            state = self.services.graph.lease_state(lease.name)
            self._busy.note(team, state)
            log.info("lease_busy", work=what, team=team, holder=state.holder if state else None)
            return None
        whole = live_holder(self.services.graph, LEASE_NAME)
        if whole is not None:
            lease.release()
            log.info("lease_busy", work=what, team=team, holder=whole, lease=LEASE_NAME)
            return None
        return lease

    def _jobs(self, night: datetime, key: str) -> tuple[list[TeamJob], bool]:
        jobs = NightJobs.read(self.services.graph, key)
        if jobs.complete:
            self._complete.add(key)
            return [], True
        return jobs.due_jobs(lambda step: self.schedule.step_slot(night, step), self.clock.now()), False

    def _night(self, night: datetime, key: str, trigger: RunTrigger) -> None:
        """Every team job of the night that is due now, up to ``worker.team_concurrency`` at once."""
        jobs, complete = self._jobs(night, key)
        if complete:
            self._night_summary(key)
            return
        if not jobs:
            return

        width = max(1, min(self.settings.worker.team_concurrency, len(jobs)))
        teams = [job.team for job in jobs]
        run_teams(teams, self._busy, width, lambda team: self._team_night(night, key, trigger, team), self._stop)
        if not self._stop.is_set() and self._jobs(night, key)[1]:
            self._night_summary(key)

    def _team_night(self, night: datetime, key: str, trigger: RunTrigger, team: str) -> None:
        lease = self._claim(team, f"night {key}")
        if lease is None:
            return
        with holding(lease):
            # Read again under the lease: another replica may have run these steps meanwhile.
            jobs = NightJobs.read(self.services.graph, key, [team])
            steps = jobs.due(team, lambda step: self.schedule.step_slot(night, step), self.clock.now())
            if not steps:
                return
            # Each step decides as of its slot, not the clock: the outcome does not depend on which
            # replica ran which team when, nor on a crash that handed a team over half-way.
            request = NightRequest(now=night, steps=steps, trigger=trigger, teams=[team], slot=key)
            hooks = NightHooks(
                clock=self.clock.now,
                now_of=lambda step: self.schedule.step_slot(night, step),
                before_step=lambda step: self._wait_for_slot(night, step),
                should_stop=self._stop.is_set,
                quiet=self._quiet,
                instruments=self.services.instruments,
                # issue 15 part 2: the window's hard stop (a catch-up, run after the window by nature, has none)
                deadline=self.schedule.deadline(night) if trigger == "schedule" else None,
                tally=self._tallies.of(key),
                jobs=jobs,  # the pipeline reports each step's outcome to the team's job state
            )
            run_night(self.services, request, hooks)
            log.info(
                "team_job_finished", slot=key, team=team, done=",".join(jobs.done(team)), left=",".join(jobs.left(team))
            )

    def _wait_for_slot(self, night: datetime, step: StepName) -> bool:
        """A step never starts before its slot (nor before its predecessor: the chain is sequential)."""
        slot = self.schedule.step_slot(night, step)
        while not self._stop.is_set():
            left = (slot - self.clock.now()).total_seconds()
            if left <= 0:
                return True
            # Only a stop may cut this wait short: an ingest must not start the next step early.
            self.clock.sleep(min(left, 5.0), self._stop)
        return False

    def _night_summary(self, key: str) -> None:
        """Once every team finished the night: one chat summary of it, from the ledger (the outbox
        keeps one per key, so the replicas that all see the night complete queue it once)."""
        if self._outbox is None or not self.settings.alerts.nightly_summary:
            return
        from taskzilla_sleep.observe.report.night import OBSERVED, created_in, render_night

        runs = self.services.graph.slot_runs(key)
        result = NightResult(run=merge_runs(runs, key))
        if not any(v and k not in OBSERVED for x in result.run.steps for k, v in x.counts.items()):
            log.info("nightly_summary_skipped", slot=key, reason="nothing changed")
            return
        text = render_night(result, self.services.graph, learnt=created_in(self.services.graph, runs))
        self._outbox.enqueue_summary(f"summary_{key}", text, self.settings.alerts.channels, self.clock.now())

    def _watchdog(self) -> None:
        graph, s = self.services.graph, self.settings.watchdog
        for team in graph.teams():
            if self._stop.is_set():
                return
            if watchdog_pass(graph, team, self.clock.now(), s) is None:
                continue
            lease = self._claim(team, f"watchdog {team}")  # the team's lease: never during its night
            if lease is None:
                continue
            with holding(lease):
                due = watchdog_pass(graph, team, self.clock.now(), s)  # again, under the lease
                if due is not None:
                    self._watchdog_pass(due)

    def _watchdog_pass(self, due: WatchdogPass) -> None:
        left = due.deferred
        groups, why = (left.groups, left.reason) if left is not None else (0, None)
        log.info("watchdog_triggered", team=due.team, new_episodes=due.new_episodes, deferred=groups, reason=why)
        hooks = NightHooks(
            clock=self.clock.now,
            should_stop=self._stop.is_set,
            quiet=self._quiet,
            instruments=self.services.instruments,
        )
        result = run_night(self.services, due.request(self.clock.now(), self.settings.watchdog), hooks)
        log.info("watchdog_finished", team=due.team, ok=result.ok, pattern_lags_s=result.run.pattern_lags_s)

    def _alerts(self) -> None:
        """Queue an alert for every open contradiction (idempotent, so a crash loses none), deliver what is due."""
        if self._outbox is None:
            return
        from taskzilla_sleep.alerts.delivery import deliver_due

        now = self.clock.now()
        self._outbox.sync_contradictions(
            self.settings.alerts.channels,
            now,
            self._outbox.evidence_examples,
            tz=self.schedule.tz,
            public_url=self.settings.api.public_url,
        )
        report = deliver_due(self._outbox, self._senders, self.settings.alerts, now)
        kinds = {name: ch.kind for name, ch in self.settings.alerts.channels.items()}
        self.services.instruments.alert_round(report.by_channel, kinds)

    def _open_alerts(self) -> None:
        """Build the chat senders at start: a missing webhook URL or token is a config error now, not at 3 am."""
        if not any(ch.enabled for ch in self.settings.alerts.channels.values()):
            return
        from taskzilla_sleep.alerts.outbox import Outbox
        from taskzilla_sleep.alerts.senders import build_senders

        self._senders = build_senders(self.settings.alerts, self._env)
        self._outbox = Outbox(self.services.graph)  # its indexes come with the graph's schema

    # -- the API ----------------------------------------------------------------------------------
    def start_api(self) -> str | None:
        """Serve the HTTP API in a thread; returns its URL (None when the API is off)."""
        if not self._serve_api:
            return None
        self._start_api()
        return f"http://{self.settings.api.host}:{self.port}"

    def api_deps(self) -> ApiDeps:
        from taskzilla_sleep.core.throttle import Throttle
        from taskzilla_sleep.interfaces.api import ApiDeps
        from taskzilla_sleep.interfaces.chatops.ops import ChatOps
        from taskzilla_sleep.interfaces.chatops.routes import chat_mounts
        from taskzilla_sleep.interfaces.mcp_server import build_server, mcp_route

        # One backoff for every surface of this server (API, MCP, console login): a client failing on
        # one waits on all of them.
        tokens = Tokens.from_settings(self.settings.api, self._api_token, Throttle(self.services.instruments))
        api = self.settings.api
        mcp = mcp_route(build_server(self.memory, None), tokens, api.host, api.max_body_bytes)
        chat = chat_mounts(ChatOps.from_settings(self.memory, self._env))  # Slack/Telegram buttons
        return ApiDeps(
            service=self.memory,
            tokens=tokens,
            status=self.status,
            metrics=self.metrics,
            mounts=[mcp, *chat],
            instruments=self.services.instruments,
            model_check=self.llm_check.last,  # never a call of its own: a probe must answer at once
        )

    def _start_api(self) -> None:
        import uvicorn

        from taskzilla_sleep.interfaces.api import create_app

        deps = self.api_deps()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.settings.api.host, self._api_port))
        except OSError as exc:
            sock.close()
            where = f"{self.settings.api.host}:{self._api_port}"
            raise ConfigError(
                f"config error: the API cannot listen on {where} ({exc.strerror}): set api.port or --api-port"
            ) from exc
        self.port = int(sock.getsockname()[1])
        # The lifespan runs the MCP session manager (/mcp); a standing MCP stream must not hold a stop.
        config = uvicorn.Config(
            create_app(deps), log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the worker owns the signals
        self._api_thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="api"
        )
        self._api_thread.start()
        deadline = time.monotonic() + 10
        while not getattr(self._server, "started", False) and time.monotonic() < deadline:
            time.sleep(0.02)
        # One file per replica (worker-<pid>.json), removed at stop: readers take a live one.
        presence.announce(self.settings.data_dir, {"api": f"http://{self.settings.api.host}:{self.port}"})

    def status(self, teams: Collection[str] | None = None) -> dict[str, Any]:
        """What GET /v1/status and the console show an admin: with ``teams`` (a token of some teams),
        only those teams' sizes, runs and nights; a run over several teams is nobody's own. None: all."""
        holder, expires = self.lease.holder()
        night = self.schedule.next_night(self.clock.now())
        runs = self.services.graph.runs(5, None if teams is None else sorted(teams))
        sizes = teams_sizes(self.services.graph, self.services.vectors, teams)
        return {
            "teams": None if teams is None else sorted(teams),
            "sizes": sizes,
            "graph": self.services.graph.describe(),
            "vectors": self.services.vectors.describe(),
            "next_night": iso_time(night),
            "clock": iso_time(self.clock.now()),
            "lease": {"holder": holder, "expires_at_ms": expires, "me": self.lease.me},
            "open_contradictions": sizes.get("contradictions_open", 0),
            "model": c.as_dict() if (c := self.llm_check.last()) is not None else None,
            "last_runs": [run_status(r) for r in runs],
            "last_nights": [night_status(n, runs_of) for n, runs_of in self._last_nights(3, teams)],
        }

    def _last_nights(self, n: int, teams: Collection[str] | None = None) -> list[tuple[Run, list[Run]]]:
        """The newest ``n`` nights, newest first: each merged (``group_nights``) with its runs (with
        ``teams``: of those teams' jobs only)."""
        runs = self.services.graph.night_runs(n)
        if teams is not None:
            runs = [r for r in runs if r.team is not None and r.team in teams]
        return [
            (night, [r for r in runs if night_key(r) == night_key(night)]) for night in reversed(group_nights(runs))
        ]

    def metrics(self) -> tuple[bytes, str]:
        from taskzilla_sleep.observe.metrics import render

        return render(self._registry())

    def _registry(self) -> Any:
        with self._metrics_lock:
            if self._metrics_registry is None:
                from taskzilla_sleep.alerts.outbox import Outbox
                from taskzilla_sleep.observe.metrics import ledger_collector

                outbox = self._outbox or Outbox(self.services.graph)
                collector = ledger_collector(
                    self.services.graph,
                    outbox_pending=outbox.pending_count if self._outbox is not None else None,
                    outbox_failed=outbox.failed_count if self._outbox is not None else None,
                    memory_index_size=self._memory_index_size,
                    index_cap=self.settings.memory_index.max_entries,
                    grace_days=self.settings.decay.grace_hours / 24,
                    team_labels_max=self.settings.metrics.team_labels_max,
                    vectors_ping=self.services.vectors.ping,
                    outbox_oldest_pending=self._oldest_pending if self._outbox is not None else None,
                    llm_up=self.llm_check.up,  # the cached verdict: a scrape never calls the model
                )
                # Beside this worker's counters: one /metrics serves both.
                self._metrics_registry = self.services.instruments.attach(collector)
            return self._metrics_registry

    def _oldest_pending(self) -> datetime | None:
        return self.services.graph.oldest_alert_at("pending")

    def _memory_index_size(self) -> int | None:
        return index_entries(self.settings.memory_dir)  # read back by the format's one owner
