"""The run ledger and the steps' bookkeeping (watermarks, the distill journal) in the graph."""

from __future__ import annotations

from collections.abc import Sequence

from taskzilla_sleep.core.models import Run
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import run_from_props, run_props, update_row
from taskzilla_sleep.stores.cypher.base import CypherBase
from taskzilla_sleep.stores.ports import PatternUpdate

Q = queries.load("ledger")


class CypherLedger(CypherBase):
    def save_run(self, run: Run) -> None:
        self._write(Q["save_run"], {"id": run.id, "props": run_props(run)})

    def get_run(self, run_id: str) -> Run | None:
        rows = self._read(Q["get_run"], {"id": run_id})
        return run_from_props(rows[0]["r"]) if rows else None

    def runs(self, n: int, teams: Sequence[str] | None = None) -> list[Run]:
        if teams is None:
            return [run_from_props(r["r"]) for r in self._read(Q["runs"], {"n": n})]
        return [run_from_props(r["r"]) for r in self._read(Q["runs_of_teams"], {"teams": list(teams), "n": n})]

    def night_runs(self, n: int) -> list[Run]:
        return [run_from_props(r["r"]) for r in self._read(Q["night_runs"], {"n": n})]

    def slot_done(self, slot: str) -> bool:
        return int(self._read(Q["slot_done"], {"slot": slot})[0]["n"]) > 0

    def slot_runs(self, slot: str, team: str | None = None) -> list[Run]:
        if team is None:
            rows = self._read(Q["slot_runs"], {"slot": slot})
        else:
            rows = self._read(Q["slot_team_runs"], {"slot": slot, "team": team})
        return [run_from_props(r["r"]) for r in rows]

    def abandon_dead_runs(self, by: str, team: str | None = None) -> list[str]:
        marked: list[str] = []
        if team is None:
            rows = self._read(Q["unfinished_runs"])
        else:
            rows = self._read(Q["unfinished_team_runs"], {"team": team})
        for r in rows:
            dead = run_from_props(r["r"]).abandoned(by)
            if dead is not None:
                self.save_run(dead)
                marked.append(dead.id)
        return marked

    def get_meta(self, key: str) -> str | None:
        rows = self._read(Q["get_meta"], {"key": key})
        return str(rows[0]["value"]) if rows and rows[0]["value"] is not None else None

    def set_meta(self, key: str, value: str) -> None:
        self._write(Q["set_meta"], {"key": key, "value": value})

    def finish_journal(self, key: str, value: str, journal: str) -> None:
        self._write(Q["finish_journal"], {"key": key, "value": value, "journal": journal})

    def update_patterns_and_meta(self, updates: Sequence[PatternUpdate], key: str, value: str) -> None:
        params = {"rows": [update_row(u) for u in updates], "key": key, "value": value}
        self._write(Q["update_patterns_and_meta"], params)
