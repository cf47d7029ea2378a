"""Many ingests into one embedded FalkorDB, with reconcile's stale-stage sweep after each day.

    python -m ops.bench.falkordb_stage_churn [--days 45] [--per-file 500] [--files-per-day 4]

Guards a FalkorDB 4.16 failure found by ``make bench``: while each ingest's commit query also deleted
a bookkeeping node of its own label, after ~64,000 episodes (128 commits) every later scan of that
label answered "Attempted to access undefined attribute" — reconcile failed, so every night did.
Ingestion now keeps no such node (the stage lives on the staged episodes). Exit 1 on the first error.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from taskzilla_sleep.core.models import Entity, EntityKind, EntityLink, Episode, Provenance
from taskzilla_sleep.stores.falkordb import open_falkordb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=45)
    ap.add_argument("--per-file", type=int, default=500)
    ap.add_argument("--files-per-day", type=int, default=4)
    a = ap.parse_args(argv)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        g = open_falkordb(Path(d) / "falkordb")
        g.ensure_schema()
        n = days = 0
        try:
            while days < a.days:
                days += 1
                for _ in range(a.files_per_day):
                    eps, links = [], []
                    for _ in range(a.per_file):
                        n += 1
                        at = t0 + timedelta(minutes=n)
                        e = Episode(id=f"e{n}", team="t", channel=f"c{n % 6}", author=f"a{n % 12}", text=f"text {n}",
                                    ts=at, provenance=Provenance.HUMAN, ingested_at=at)  # fmt: skip
                        eps.append(e)
                        person = Entity(team="t", kind=EntityKind.PERSON, name=e.author)
                        links.append(EntityLink(episode_id=e.id, entity=person, role="author"))
                    g.upsert_episodes(eps, links)
                g.drop_stale_stages()
        except Exception as exc:
            print(f"day {days}, {n} episodes: {exc}")
            return 1
        finally:
            g.close()
    print(f"{n} episodes in {a.days * a.files_per_day} files, no error ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
