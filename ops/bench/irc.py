"""The first days of the Ubuntu IRC stream as episodes, read from the shared data folder at run time.

Mapping (the data set is never copied into the repository):

- the first ``days`` distinct ``session_id`` days (sorted) are replayed as consecutive days from
  ``start``: day k of the stream is day k of the bench, at its own ``session_ts`` time of day (UTC,
  written with its Europe/Amsterdam offset). Messages within one minute of one conversation keep
  their log order through the seconds (0, 1, 2, …). The real dates are years apart; replaying them
  back to back is what makes it "30 days of history" for prune, distill's window and decay.
- ``speaker`` -> author, the channel part of ``conv_id`` -> channel (``train/2004-12-25.train-c``
  -> ``train-c``, ``dev/2004-11-15_03`` -> ``dev-03``, ``new-domains/rust.1`` -> ``rust``),
  provenance ``human``, team ``ubuntu``, id ``irc-`` + ``msg_id`` with ``/`` as ``.``.
- blank messages are left out (an episode needs text) and counted.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

DEFAULT_PATH = Path("/work/shared/data/irc-ubuntu/episodes.jsonl.gz")
TZ = ZoneInfo("Europe/Amsterdam")
TEAM = "ubuntu"
_DATED = re.compile(r"^\d{4}-\d\d-\d\d[._](.+)$")


def channel_of(conv_id: str) -> str:
    split, _, rest = conv_id.partition("/")
    m = _DATED.match(rest)
    if m:
        part = m.group(1)
        name = part if re.search(r"[A-Za-z]", part) else f"{split}-{part}"
    else:
        name = rest.split(".", 1)[0]
    return name[:200] or split


def load(path: Path, days: int, start: date) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """(episodes per replayed day, facts about the mapping)."""
    # Two streaming passes (the days, then their messages): the other 200,000 lines never sit in
    # memory, so the bench's peak RSS stays the worker's.
    with gzip.open(path, "rt", encoding="utf-8") as f:
        every = {json.loads(line)["session_id"] for line in f}
    sessions = sorted(every)[:days]
    rank = {s: i for i, s in enumerate(sessions)}
    rows: list[dict[str, Any]] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["session_id"] in rank:
                rows.append(r)
    out: list[list[dict[str, Any]]] = [[] for _ in sessions]
    seconds: Counter[tuple[str, str, str]] = Counter()
    blank = 0
    for r in rows:
        k = rank.get(r["session_id"])
        if k is None:
            continue
        text = str(r.get("text") or "")
        if not text.strip():
            blank += 1
            continue
        hhmm = str(r["session_ts"])
        parts = [int(x) for x in hhmm.split(":")]
        key = (r["conv_id"], r["session_id"], hhmm)
        sec = parts[2] if len(parts) > 2 else min(59, seconds[key])
        seconds[key] += 1
        day = start + timedelta(days=k)
        ts = datetime(day.year, day.month, day.day, parts[0], parts[1], sec, tzinfo=UTC).astimezone(TZ)
        out[k].append(
            {
                "id": "irc-" + str(r["msg_id"]).replace("/", ".")[:120],
                "team": TEAM,
                "channel": channel_of(str(r["conv_id"])),
                "author": (str(r.get("speaker") or "").strip() or "unknown")[:200],
                "text": text[:8000],
                "ts": ts.isoformat(timespec="seconds"),
                "provenance": "human",
            }
        )
    for eps in out:
        eps.sort(key=lambda e: (e["ts"], e["id"]))
    info = {
        "source": str(path),
        "sessions": sessions,
        "episodes": sum(len(d) for d in out),
        "blank_left_out": blank,
        "per_day": [len(d) for d in out],
        "channels": sorted({e["channel"] for d in out for e in d}),
        "authors": len({e["author"] for d in out for e in d}),
    }
    return out, info
