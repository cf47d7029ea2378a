"""A fact pinned with a team name the vector store refuses is refused before anything is written."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from taskzilla_sleep.app import build
from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.memory import facts

NOW = datetime.fromisoformat("2026-11-28T03:05:00+01:00")


@pytest.mark.parametrize("team", ["a b", "../x", ""])
def test_pin_with_an_invalid_team_writes_nothing(tmp_path: Path, team: str) -> None:
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})) as s:
        with pytest.raises(InputError, match="invalid team name"):
            facts.pin(s.graph, s.vectors, team, "Martin is the manager.", "martin", NOW, "martin")
        assert s.graph.counts().patterns == {}
        assert s.graph.teams() == []
