#!/usr/bin/env python3
"""Build and check the hard-case corpus.

    python3 corpus_tool.py build   # src/wNN.txt -> wNN.jsonl + wNN.gold.json
                                   # src/wNN-LL.txt -> wNN-LL.jsonl + wNN-LL.gold.json
    python3 corpus_tool.py check   # validate every week file and its gold file, print counts

Written by the corpus author without reading the product code. It only knows the
episode format and the case classes given in the brief.

Source format (src/wNN.txt):
    team: <team>            week_start: YYYY-MM-DD   tz: +HH:MM   voice: <voice>
    @belief {json with "key" and the gold fields}
    ---
    <Day> <HH:MM> <channel> <author> <prov> <label> | <text>
Day is Mon..Sun, prov is h(uman) b(ot) d (ai-draft) i(mport); label shorthands:
q question, r reply, a anecdote, s status, l logistics, c chatter.
Lines are stably sorted by time, then numbered.

Translations: src/wNN-LL.txt (LL a language in LANG_ID, e.g. de, nl) is week wNN
translated line by line: the same heads (day, time, channel, author, provenance,
label) in the same order, only the text (and the @belief prose) translated. Its
ids are <LANG_ID[LL]>NN-NNNN (d01-0001 for w01-de, n01-0001 for w01-nl), its gold
file carries "language": "LL" and "translation_of": "wNN", and `check` verifies that
it lines up with the original episode by episode. Every gold file carries
"language" ("en" unless the header says otherwise).
"""
import datetime as dt
import glob
import json
import os
import re
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
PROV = {"h": "human", "b": "bot", "d": "ai-draft", "i": "import"}
SHORT = {"q": "question", "r": "reply", "a": "anecdote", "s": "status",
         "l": "logistics", "c": "chatter"}
PLAIN = {"question", "reply", "anecdote", "status", "logistics", "chatter", "draft"}
PREFIX_CLASS = {"habit": {"habit"}, "change-old": {"change"}, "change-new": {"change"},
                "disagree-a": {"disagreement"}, "disagree-b": {"disagreement"},
                "pref": {"preference"}, "injection": {"injection"},
                "draft": {"habit", "change"}, "bot": {"habit", "change"}}
SLOTS = {"amount", "count", "duration", "time", "weekday", "date", "named", "polarity"}
CLASSES = {"habit", "change", "disagreement", "preference", "injection"}
REQUIRED = {"habit": ["statement", "question"],
            "change": ["slot", "cue", "old", "new", "question"],
            "disagreement": ["slot", "a", "b"],
            "preference": ["person", "statement"],
            "injection": ["statement"]}
ID_RE = re.compile(r"^[wdn]\d\d-\d{4}$")
LANG_ID = {"de": "d", "nl": "n"}          # id letter of a translated week
LANGUAGES = {"en"} | set(LANG_ID)
WEEK_RE = re.compile(r"^w(\d\d)(?:-([a-z]{2}))?$")


def week_info(week):
    """(id prefix, language, original week or None) of a week name: w01, w01-de."""
    m = WEEK_RE.match(week)
    if not m or (m.group(2) and m.group(2) not in LANG_ID):
        raise SystemExit(f"bad week name {week!r}")
    if not m.group(2):
        return week, "en", None
    return LANG_ID[m.group(2)] + m.group(1), m.group(2), "w" + m.group(1)


def week_files(folder, ext):
    """wNN.EXT and wNN-LL.EXT in folder, sorted so each original precedes its translations."""
    found = glob.glob(os.path.join(folder, "w[0-9][0-9]" + ext))
    found += glob.glob(os.path.join(folder, "w[0-9][0-9]-[a-z][a-z]" + ext))
    return sorted(found, key=lambda p: os.path.basename(p)[:-len(ext)])
TEAM_RE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


def build_one(path):
    meta, beliefs, rows = {}, {}, []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    i = 0
    while lines[i].strip() != "---":
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("@belief "):
            b = json.loads(line[len("@belief "):])
            key = b.pop("key")
            if key in beliefs:
                raise SystemExit(f"{path}: belief {key} twice")
            beliefs[key] = b
            continue
        for part in re.findall(r"(\w+):\s*(\S+)", line):
            meta[part[0]] = part[1]
    start = dt.date.fromisoformat(meta["week_start"])
    tzh, tzm = int(meta["tz"][:3]), int(meta["tz"][0] + meta["tz"][4:])
    tz = dt.timezone(dt.timedelta(hours=tzh, minutes=tzm))
    for n, line in enumerate(lines[i + 1:], start=i + 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head, sep, text = line.partition(" | ")
        if not sep:
            raise SystemExit(f"{path}:{n}: no ' | ' separator")
        parts = head.split()
        if len(parts) != 6:
            raise SystemExit(f"{path}:{n}: head needs 6 fields: {head!r}")
        day, hm, channel, author, prov, label = parts
        hms = [int(x) for x in hm.split(":")] + [0]
        when = dt.datetime.combine(start + dt.timedelta(days=DAYS.index(day)),
                                   dt.time(hms[0], hms[1], hms[2] if len(hms) > 3 else 0), tz)
        rows.append((when, n, channel,
                     author, PROV[prov], SHORT.get(label, label), text.strip()))
    rows.sort(key=lambda r: (r[0], r[1]))
    week = os.path.basename(path)[:-len(".txt")]
    prefix, lang, original = week_info(week)
    if meta.get("language", lang) != lang:
        raise SystemExit(f"{path}: language {meta.get('language')} but file name says {lang}")
    out, labels = [], {}
    for k, (when, _n, channel, author, prov, label, text) in enumerate(rows, start=1):
        mid = f"{prefix}-{k:04d}"
        out.append({"id": mid, "team": meta["team"], "channel": channel, "author": author,
                    "text": text, "ts": when.isoformat(), "provenance": prov})
        labels[mid] = label
    gold = {"team": meta["team"], "week_start": meta["week_start"], "voice": meta["voice"],
            "language": lang}
    if original:
        gold["translation_of"] = original
    gold.update({"labels": labels, "beliefs": beliefs})
    with open(os.path.join(HERE, f"{week}.jsonl"), "w", encoding="utf-8") as fh:
        for o in out:
            fh.write(json.dumps(o, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, f"{week}.gold.json"), "w", encoding="utf-8") as fh:
        json.dump(gold, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    print(f"built {week}: {len(out)} episodes, {len(beliefs)} beliefs")


def label_class(label):
    if label in PLAIN:
        return label
    return label.split(":", 1)[0]


def check():
    errors, warns = [], []
    seen_ids = set()
    teams = set()
    msg_counts = Counter()
    belief_counts = Counter()
    per_week = []
    slots = Counter()
    cues = Counter()
    question_clusters = 0
    total = 0
    originals = {}
    for jpath in week_files(HERE, ".jsonl"):
        week = os.path.basename(jpath)[:-len(".jsonl")]
        prefix, lang, original = week_info(week)
        gpath = os.path.join(HERE, f"{week}.gold.json")
        E = lambda m: errors.append(f"{week}: {m}")
        with open(gpath, encoding="utf-8") as fh:
            gold = json.load(fh)
        eps = []
        with open(jpath, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    o = json.loads(line)
                except json.JSONDecodeError as exc:
                    E(f"line {n} does not parse: {exc}")
                    continue
                eps.append(o)
        need = {"id", "team", "channel", "author", "text", "ts", "provenance"}
        start = dt.date.fromisoformat(gold["week_start"])
        if start.weekday() != 0:
            E("week_start is not a Monday")
        last = None
        wteams = set()
        by_id = {}
        for o in eps:
            if set(o) != need:
                E(f"{o.get('id')}: fields {sorted(o)}")
            if not all(isinstance(o.get(f), str) and o.get(f) for f in need):
                E(f"{o.get('id')}: empty or non-string field")
            if not ID_RE.match(o["id"]) or not o["id"].startswith(prefix + "-"):
                E(f"bad id {o['id']}")
            if o["id"] in seen_ids:
                E(f"duplicate id {o['id']}")
            seen_ids.add(o["id"])
            by_id[o["id"]] = o
            if not TEAM_RE.match(o["team"]):
                E(f"bad team {o['team']}")
            wteams.add(o["team"])
            if len(o["channel"]) > 200 or len(o["author"]) > 200:
                E(f"{o['id']}: channel/author too long")
            if o["provenance"] not in PROV.values():
                E(f"{o['id']}: provenance {o['provenance']}")
            ts = dt.datetime.fromisoformat(o["ts"])
            if ts.tzinfo is None:
                E(f"{o['id']}: ts without offset")
            if last and ts < last:
                E(f"{o['id']}: ts out of order")
            last = ts
            if not (start <= ts.date() < start + dt.timedelta(days=7)):
                E(f"{o['id']}: ts outside the week")
            if not (7 <= ts.hour < 21):
                warns.append(f"{o['id']}: ts {ts.time()} outside 07-21")
        if len(wteams) != 1 or gold["team"] not in wteams:
            E(f"teams {wteams} vs gold {gold['team']}")
        if wteams & teams:
            E("team reused across weeks")
        teams |= wteams
        labels = gold["labels"]
        beliefs = gold["beliefs"]
        if gold.get("language") != lang:
            E(f"language {gold.get('language')!r}, expected {lang!r}")
        if gold.get("translation_of") != original:
            E(f"translation_of {gold.get('translation_of')!r}, expected {original!r}")
        if original is None:
            originals[week] = (eps, labels, beliefs)
        elif original not in originals:
            E(f"translation of {original}, which is missing")
        else:
            oeps, olabels, obeliefs = originals[original]
            if len(oeps) != len(eps):
                E(f"{len(eps)} episodes, {original} has {len(oeps)}")
            for o, t in zip(oeps, eps):
                for f in ("channel", "author", "ts", "provenance"):
                    if o[f] != t[f]:
                        E(f"{t['id']}: {f} {t[f]!r} differs from {o['id']} {o[f]!r}")
                if olabels.get(o["id"]) != labels.get(t["id"]):
                    E(f"{t['id']}: label {labels.get(t['id'])} differs from {o['id']} {olabels.get(o['id'])}")
            if set(obeliefs) != set(beliefs):
                E(f"belief keys differ from {original}")
            for key in set(obeliefs) & set(beliefs):
                for f in ("class", "slot", "cue", "person"):
                    if obeliefs[key].get(f) != beliefs[key].get(f):
                        E(f"belief {key}: {f} differs from {original}")
                for f in ("statement", "question", "old", "new", "a", "b"):
                    if f in obeliefs[key] and obeliefs[key][f] == beliefs[key].get(f):
                        E(f"belief {key}: {f} not translated")
        if set(labels) != set(by_id):
            E(f"labels/ids mismatch: {len(set(labels) ^ set(by_id))}")
        used = defaultdict(lambda: defaultdict(list))
        for mid, lab in labels.items():
            if mid not in by_id:
                continue
            o = by_id[mid]
            if lab in PLAIN:
                cls, key = lab, None
            elif ":" in lab:
                cls, key = lab.split(":", 1)
                if cls not in PREFIX_CLASS:
                    E(f"{mid}: bad label {lab}")
                    continue
                if key not in beliefs:
                    E(f"{mid}: undescribed key {key}")
                    continue
                if beliefs[key].get("class") not in PREFIX_CLASS[cls]:
                    E(f"{mid}: {cls} on a {beliefs[key].get('class')} belief")
                used[key][cls].append(o)
            else:
                E(f"{mid}: bad label {lab}")
                continue
            if (cls == "draft") != (o["provenance"] == "ai-draft"):
                E(f"{mid}: draft label vs provenance {o['provenance']}")
            if cls == "bot" and o["provenance"] != "bot":
                E(f"{mid}: bot label on {o['provenance']}")
            if o["provenance"] == "bot" and cls not in ("bot", "logistics", "status"):
                E(f"{mid}: bot message labelled {lab}")
            msg_counts[cls] += 1
        for key, b in beliefs.items():
            c = b.get("class")
            if c not in CLASSES:
                E(f"belief {key}: class {c}")
                continue
            for f in REQUIRED[c]:
                if f not in b:
                    E(f"belief {key}: missing {f}")
            if not used.get(key):
                E(f"belief {key} never used")
            u = used[key]
            if c in ("change", "disagreement"):
                if b.get("slot") not in SLOTS:
                    E(f"belief {key}: slot {b.get('slot')}")
                slots[(c, b.get("slot"))] += 1
            if c == "habit":
                hs = [o for o in u["habit"] if o["provenance"] == "human"]
                people = {o["author"] for o in hs}
                days = {o["ts"][:10] for o in hs}
                if not (len(people) >= 3 or (len(hs) >= 3 and len(people) >= 2)) or len(days) < 3:
                    E(f"habit {key}: {len(hs)} statements, {len(people)} people, {len(days)} days")
            if c == "change":
                if not isinstance(b.get("cue"), bool):
                    E(f"change {key}: cue must be bool")
                cues[b.get("cue")] += 1
                old, new = u["change-old"], u["change-new"]
                if len(old) < 3 or len(new) < 3:
                    E(f"change {key}: {len(old)} old, {len(new)} new")
                if old and new and max(o["ts"] for o in old) >= min(o["ts"] for o in new):
                    if max(dt.datetime.fromisoformat(o["ts"]) for o in old) >= min(dt.datetime.fromisoformat(o["ts"]) for o in new):
                        E(f"change {key}: old after new")
                nd = {o["ts"][:10] for o in new}
                npeople = {o["author"] for o in new}
                if len(nd) < 2 and len(npeople) < 3:
                    E(f"change {key}: new only on {nd} by {npeople}")
                if len({o["author"] for o in old}) < 2:
                    warns.append(f"change {key}: old by one person")
            if c == "disagreement":
                a, bb = u["disagree-a"], u["disagree-b"]
                if len(a) < 3 or len(bb) < 3:
                    E(f"disagreement {key}: {len(a)} a, {len(bb)} b")
                if {o["author"] for o in a} & {o["author"] for o in bb}:
                    E(f"disagreement {key}: same author on both sides")
            if c == "preference" and not u["pref"]:
                E(f"preference {key} unused")
            belief_counts[c] += 1
        # question clusters: marked in source with "#qcluster" comments is overkill;
        # count weeks' question labels instead.
        wc = Counter(label_class(l) for l in labels.values())
        per_week.append((week, gold["team"], gold["voice"], len(eps),
                         len({o["channel"] for o in eps}), len({o["author"] for o in eps if o["provenance"] == "human" and not labels[o["id"]].startswith("injection")}),
                         wc))
        if not (150 <= len(eps) <= 350):
            E(f"{len(eps)} episodes")
        total += len(eps)
    for w in warns:
        print("warn:", w)
    for e in errors:
        print("ERROR:", e)
    print(f"\n{len(per_week)} weeks, {total} episodes, {len(errors)} errors, {len(warns)} warnings\n")
    order = ["habit", "change-old", "change-new", "disagree-a", "disagree-b", "pref",
             "question", "reply", "anecdote", "status", "logistics", "chatter",
             "draft", "injection", "bot"]
    print("| week | team | voice | episodes | channels | people | " + " | ".join(order) + " |")
    print("|" + "---|" * (6 + len(order)))
    for week, team, voice, n, ch, pp, wc in per_week:
        print(f"| {week} | {team} | {voice} | {n} | {ch} | {pp} | " + " | ".join(str(wc.get(k, 0)) for k in order) + " |")
    print(f"| all | | | {total} | | | " + " | ".join(str(msg_counts.get(k, 0)) for k in order) + " |")
    print("\n| belief class | keys |\n|---|---|")
    for c in ["habit", "change", "disagreement", "preference", "injection"]:
        print(f"| {c} | {belief_counts[c]} |")
    print("\n| change/disagreement slot | keys |\n|---|---|")
    for (c, s), v in sorted(slots.items()):
        print(f"| {c} {s} | {v} |")
    print(f"\nchanges with cue: {cues[True]}, without cue: {cues[False]}")
    return 1 if errors else 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "check"
    if cmd == "build":
        for p in week_files(os.path.join(HERE, "src"), ".txt"):
            build_one(p)
        sys.exit(check())
    sys.exit(check())
