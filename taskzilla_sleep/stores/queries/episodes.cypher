// -- existing_episodes --
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN e.id AS id, e.status AS status

// -- stored_episodes --
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN e.id AS id, e.status AS status, e.content_hash AS content_hash, e.team AS team, e.channel AS channel,
       e.author AS author, e.ts AS ts, e.provenance AS provenance, e.text AS text, e.edited_at AS edited_at,
       e.edit_pending AS edit_pending

// -- edit_episodes --
// A stored edit as new or newer wins: its row changes nothing. The new text is judged afresh: the
// episode is raw and undistilled again and no pattern's evidence (the caller re-scores those patterns
// while edit_pending is set); its mentions are the new text's.
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
WHERE e.team = r.team AND e.status IN $live AND coalesce(e.edited_at, -1) < r.edited_at
SET e.text = r.text, e.content_hash = r.content_hash, e.edited_at = r.edited_at, e.edit_pending = timestamp(),
    e.status = 'raw', e.schema_absorbed = 0, e.injection = r.injection, e.injection_lint = r.injection_lint
// One property cleared per SET: FalkorDB 4.16 clears the wrong ones when one SET (or REMOVE) clears
// several (FalkorDB#1787; tests/contract/test_graph_store.py).
SET e.absorbed_by = null
SET e.absorbed_at = null
SET e.distilled_at = null
SET e.distill_night = null
SET e.distill_attempts = null
SET e.declined_size = null
WITH e, r
OPTIONAL MATCH (:Pattern)-[v:EVIDENCED_BY]->(e)
WITH e, r, collect(v) AS vs
FOREACH (v IN vs | DELETE v)
WITH e, r
OPTIONAL MATCH (e)-[m:MENTIONS]->(:Entity)
WITH e, r, collect(m) AS ms
FOREACH (m IN ms | DELETE m)
WITH e, r
FOREACH (l IN r.links |
    MERGE (n:Entity {key: l.key})
    ON CREATE SET n.team = l.team, n.kind = l.kind, n.name = l.name
    ON MATCH SET n.team = coalesce(n.team, l.team), n.kind = coalesce(n.kind, l.kind), n.name = coalesce(n.name, l.name)
    MERGE (e)-[:MENTIONS {role: l.role}]->(n))
RETURN e.id AS id

// -- unflagged_episodes --
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $live AND coalesce(e.injection_lint, '') <> $lint
RETURN e.id AS id, e.text AS text

// -- flag_episodes --
// Only while the episode holds the text the flag was computed from: an edit since wrote its own.
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
WHERE e.status IN $live AND e.text = r.text
SET e.injection = r.injection, e.injection_lint = r.injection_lint
RETURN count(e) AS n

// -- stale_edits --
MATCH (e:Episode)
WHERE e.edit_pending IS NOT NULL AND e.edit_pending < timestamp() - $age_ms
RETURN e.team AS team, e.id AS id

// -- link_reply_parents --
UNWIND $ids AS id
MATCH (e:Episode {id: id})
WHERE e.reply_to IS NOT NULL
MATCH (p:Episode {id: e.reply_to})
WHERE p.team = e.team
MERGE (e)-[:REPLY_TO]->(p)

// -- link_reply_children --
UNWIND $ids AS id
MATCH (p:Episode {id: id})
MATCH (c:Episode {reply_to: id})
WHERE c.team = p.team AND c.status <> 'staged'
MERGE (c)-[:REPLY_TO]->(p)

// -- replies --
MATCH (c:Episode)-[:REPLY_TO]->(p:Episode)
WHERE c.team = $team
RETURN c.id AS reply, p.id AS answered

// -- stage_episodes --
UNWIND $rows AS r
CREATE (e:Episode)
SET e += r.props, e.stage = $stage, e.staged_at = timestamp()
WITH e, r
UNWIND r.links AS l
MERGE (n:Entity {key: l.key})
ON CREATE SET n.team = l.team, n.kind = l.kind, n.name = l.name, n.stage = $stage
ON MATCH SET n.team = coalesce(n.team, l.team), n.kind = coalesce(n.kind, l.kind), n.name = coalesce(n.name, l.name)
MERGE (e)-[:MENTIONS {role: l.role}]->(n)

// -- commit_stage --
OPTIONAL MATCH (s:Episode {stage: $stage})
OPTIONAL MATCH (x:Episode {id: s.staged_id})
WITH count(DISTINCT s) AS n, count(x) AS clashes
WHERE clashes = 0 AND n = $expected
MATCH (s:Episode {stage: $stage})
SET s.id = s.staged_id, s.status = s.staged_status
REMOVE s.staged_id, s.staged_status, s.stage, s.staged_at
WITH DISTINCT n
OPTIONAL MATCH (m:Entity {stage: $stage})
REMOVE m.stage
RETURN DISTINCT n

// -- stage_state --
OPTIONAL MATCH (s:Episode {stage: $stage})
OPTIONAL MATCH (x:Episode {id: s.staged_id})
RETURN count(DISTINCT s) AS staged, count(x) AS clashes

// -- drop_staged --
MATCH (s:Episode {stage: $stage}) WITH s LIMIT 5000 DETACH DELETE s RETURN count(*) AS n

// -- drop_stage_entities --
MATCH (n:Entity {stage: $stage})
OPTIONAL MATCH (n)-[r]-()
WITH n, count(r) AS rels
WHERE rels = 0
DELETE n

// -- unmark_stage_entities --
MATCH (n:Entity {stage: $stage}) REMOVE n.stage

// -- stale_stages --
MATCH (e:Episode)
WHERE e.status = 'staged'
WITH e.stage AS token, max(e.staged_at) AS last
WHERE last < timestamp() - $age_ms
RETURN token

// -- get_episodes --
UNWIND $ids AS id
MATCH (e:Episode {id: id})
RETURN properties(e) AS p

// -- episode_cards --
// Each repeat is looked up by id (an `IN` list is a label scan on FalkorDB: 50x slower).
UNWIND $rows AS row
MATCH (e:Episode {id: row.id})
WHERE e.status IN $live AND ($drafts OR e.provenance <> 'ai-draft')
WITH e, row
UNWIND CASE WHEN size(row.same) = 0 THEN [null] ELSE row.same END AS same
OPTIONAL MATCH (r:Episode {id: same})
WHERE r.status IN $live AND ($drafts OR r.provenance <> 'ai-draft')
RETURN e.id AS id, e.team AS team, e.channel AS channel, e.author AS author, e.text AS text, e.ts AS ts,
       e.provenance AS provenance, e.status AS status, e.absorbed_by AS absorbed_by, e.injection AS injection,
       e.injection_lint AS injection_lint,
       collect(CASE WHEN r.text = e.text THEN [r.absorbed_by] END) AS repeats,
       collect(CASE WHEN r.text <> e.text THEN [r.id, r.text, r.absorbed_by] END) AS others

// -- live_episode_texts --
UNWIND $ids AS id
MATCH (e:Episode {id: id})
WHERE e.team = $team AND e.status IN $live
RETURN e.id AS id, e.text AS text

// -- live_episode_ids --
MATCH (e:Episode) WHERE e.team = $team AND e.status IN $live RETURN collect(e.id) AS ids

// -- episodes_in_window --
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses AND e.ts > $from AND e.ts <= $to
RETURN properties(e) AS p

// -- pending_raw_before --
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ts <= $before AND e.distilled_at IS NULL
  AND (e.ts > $legacy OR e.ingested_at > $legacy)
RETURN properties(e) AS p

// -- episodes_by_status --
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses
RETURN properties(e) AS p

// -- stale_raw --
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ts <= $cutoff AND e.ingested_at <= $cutoff
  AND (e.last_accessed IS NULL OR e.last_accessed <= $cutoff) AND coalesce(e.pinned, false) = false
RETURN properties(e) AS p

// -- count_episodes --
MATCH (e:Episode)
WHERE e.team = $team AND e.status IN $statuses
RETURN count(e) AS n

// -- episode_entities --
UNWIND $ids AS id
MATCH (e:Episode {id: id})-[m:MENTIONS]->(n:Entity)
RETURN e.id AS id, n.key AS key, n.kind AS kind, n.name AS name, m.role AS role

// -- given_up_episodes --
MATCH (e:Episode)
WHERE e.status = 'raw' AND e.distill_attempts > 0 AND e.distilled_at IS NOT NULL
  AND ($team IS NULL OR e.team = $team)
RETURN e.team AS team, e.id AS id

// -- count_new_raw --
MATCH (e:Episode)
WHERE e.team = $team AND e.status = 'raw' AND e.ingested_at > $since AND e.provenance <> 'ai-draft'
RETURN count(e) AS n

// -- evidence_ids --
MATCH (p:Pattern)-[:EVIDENCED_BY]->(e:Episode)
WHERE p.team = $team
RETURN DISTINCT e.id AS id

// -- update_episodes --
UNWIND $rows AS row
MATCH (e:Episode {id: row.id})
SET e += row.set

// -- retire_episodes --
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
SET e.status = r.status, e.text = null, e.retired_at = r.at
MERGE (t:Tombstone {id: r.id})
ON CREATE SET t.kind = 'episode', t.team = e.team, t.at = r.at, t.reason = r.reason, t.pattern_id = r.pattern_id

// -- mark_episodes_accessed --
UNWIND $ids AS id MATCH (e:Episode {id: id}) SET e.last_accessed = $at

// -- episodes_by_author --
MATCH (e:Episode)
WHERE e.team = $team AND toLower(e.author) = toLower($author) AND e.stage IS NULL
RETURN properties(e) AS p

// -- forget_episodes --
// A tombstone a retirement or prune left (no ``by``) takes who asked, when and why; one a person's
// request wrote is kept as it is (a rerun changes nothing).
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
SET e.status = 'forgotten', e.text = null
MERGE (t:Tombstone {id: r.id})
ON CREATE SET t.kind = 'episode', t.team = e.team
WITH e, t, r, t.by IS NULL AS first
SET t.at = CASE WHEN first THEN r.at ELSE t.at END,
    t.reason = CASE WHEN first THEN r.reason ELSE t.reason END,
    t.by = CASE WHEN first THEN r.by ELSE t.by END
WITH DISTINCT e
OPTIONAL MATCH (:Pattern)-[v:EVIDENCED_BY]->(e)
WITH e, collect(v) AS vs
FOREACH (v IN vs | DELETE v)
WITH e
OPTIONAL MATCH (e)-[m:MENTIONS]->(n:Entity)
WITH collect(m) AS ms, collect(DISTINCT n) AS ns
FOREACH (m IN ms | DELETE m)
// An entity nothing links any more (the person who asked, a tag only they used) goes too.
WITH ns
UNWIND ns AS n
OPTIONAL MATCH (n)-[x]-()
WITH n, count(x) AS rels
WHERE rels = 0
DELETE n

// -- episode_records --
MATCH (e:Episode)
WHERE e.team = $team AND e.stage IS NULL
OPTIONAL MATCH (e)-[m:MENTIONS]->(n:Entity)
RETURN properties(e) AS p, collect([n.key, n.kind, n.name, m.role]) AS mentions

// -- restore_episodes --
// Ids are unique within a call (the importer checks); an id already stored is left as it is.
UNWIND $rows AS r
OPTIONAL MATCH (x:Episode {id: r.id})
WITH r, x
WHERE x IS NULL
CREATE (e:Episode)
SET e += r.props
FOREACH (l IN r.links |
    MERGE (n:Entity {key: l.key})
    ON CREATE SET n.team = l.team, n.kind = l.kind, n.name = l.name
    ON MATCH SET n.team = coalesce(n.team, l.team), n.kind = coalesce(n.kind, l.kind), n.name = coalesce(n.name, l.name)
    MERGE (e)-[:MENTIONS {role: l.role}]->(n))
