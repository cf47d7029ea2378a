// The archive: before-images of what a change wrote (an :Archived node per change and item, its
// properties as JSON), the :Change that made them, and what undo and release do with them.

// -- read_episode --
UNWIND $keys AS k
MATCH (n:Episode {id: k})
RETURN k AS key, properties(n) AS p, [] AS edges

// -- read_pattern --
UNWIND $keys AS k
MATCH (n:Pattern {id: k})
OPTIONAL MATCH (n)-[r]->(x)
WHERE type(r) IN $owned
RETURN k AS key, properties(n) AS p, collect([type(r), coalesce(x.id, x.key), r.prompt]) AS edges

// -- read_contradiction --
UNWIND $keys AS k
MATCH (n:Contradiction {id: k})
OPTIONAL MATCH (n)-[r]->(x)
WHERE type(r) IN $owned
RETURN k AS key, properties(n) AS p, collect([type(r), x.id, null]) AS edges

// -- read_tombstone --
UNWIND $keys AS k
MATCH (n:Tombstone {id: k})
RETURN k AS key, properties(n) AS p, [] AS edges

// -- read_entity --
UNWIND $keys AS k
MATCH (n:Entity {key: k})
RETURN k AS key, properties(n) AS p, [] AS edges

// -- read_meta --
UNWIND $keys AS k
MATCH (n:Meta {key: k})
RETURN k AS key, properties(n) AS p, [] AS edges

// -- archived_keys --
UNWIND $keys AS k
MATCH (a:Archived {key: k})
RETURN a.key AS key, a.text IS NOT NULL AS has_text

// -- save_change --
MERGE (c:Change {id: $id})
ON CREATE SET c += $props
WITH c
WHERE NOT $team IN c.teams
SET c.teams = c.teams + [$team]

// -- save_archived --
UNWIND $rows AS r
MERGE (a:Archived {key: r.key})
ON CREATE SET a += r

// -- add_archived_text --
UNWIND $rows AS r
MATCH (a:Archived {key: r.key})
WHERE a.text IS NULL
SET a.text = r.text, a.text_bytes = r.text_bytes

// -- get_change --
MATCH (c:Change {id: $id}) RETURN properties(c) AS c

// -- archived_items --
MATCH (a:Archived) WHERE a.change = $id RETURN properties(a) AS a

// -- later_changes --
MATCH (me:Change {id: $id})
MATCH (a:Archived) WHERE a.change = $id
MATCH (b:Archived {item: a.item})
WHERE b.change <> $id
WITH DISTINCT me, b.change AS other
MATCH (c:Change {id: other})
WHERE c.undone_at IS NULL AND (c.seq > me.seq OR (c.seq = me.seq AND c.id > me.id))
RETURN properties(c) AS c

// -- restore_episode --
// A forgotten episode stays forgotten; the text is the image's when it kept one, else the one it has.
UNWIND $rows AS r
MATCH (n:Episode {id: r.key})
WHERE n.status <> 'forgotten'
WITH n, r, n.text AS kept
SET n = r.props
SET n.text = coalesce(r.text, kept)

// -- restore_pattern --
// Its properties, then its owned relationships as they were (to what is still there and not forgotten).
UNWIND $rows AS r
MATCH (n:Pattern {id: r.key})
SET n = r.props
WITH n, r
OPTIONAL MATCH (n)-[x]->()
WHERE type(x) IN $owned
WITH n, r, collect(x) AS xs
FOREACH (x IN xs | DELETE x)
WITH n, r
UNWIND r.edges AS e
OPTIONAL MATCH (t:Pattern {id: e.b})
OPTIONAL MATCH (y:Entity {key: e.b})
OPTIONAL MATCH (z:Episode {id: e.b})
FOREACH (_ IN CASE WHEN e.t = 'ABOUT' AND y IS NOT NULL THEN [1] ELSE [] END | MERGE (n)-[:ABOUT]->(y))
FOREACH (_ IN CASE WHEN e.t = 'EVIDENCED_BY' AND z IS NOT NULL AND z.status <> 'forgotten' THEN [1] ELSE [] END |
    MERGE (n)-[:EVIDENCED_BY]->(z))
FOREACH (_ IN CASE WHEN e.t = 'MERGED_INTO' AND t IS NOT NULL THEN [1] ELSE [] END | MERGE (n)-[:MERGED_INTO]->(t))
FOREACH (_ IN CASE WHEN e.t = 'REFINES' AND t IS NOT NULL THEN [1] ELSE [] END | MERGE (n)-[:REFINES]->(t))
FOREACH (_ IN CASE WHEN e.t = 'COMPATIBLE_WITH' AND t IS NOT NULL THEN [1] ELSE [] END | MERGE (n)-[:COMPATIBLE_WITH]->(t))
FOREACH (_ IN CASE WHEN e.t = 'SUPERSEDES' AND t IS NOT NULL THEN [1] ELSE [] END | MERGE (n)-[:SUPERSEDES]->(t))
FOREACH (_ IN CASE WHEN e.t = 'UNRELATED_TO' AND t IS NOT NULL THEN [1] ELSE [] END |
    MERGE (n)-[u:UNRELATED_TO]->(t) SET u.prompt = e.p)

// -- restore_contradiction --
UNWIND $rows AS r
MATCH (n:Contradiction {id: r.key})
SET n = r.props
WITH n, r
OPTIONAL MATCH (n)-[x]->()
WHERE type(x) IN $owned
WITH n, r, collect(x) AS xs
FOREACH (x IN xs | DELETE x)
WITH n, r
UNWIND r.edges AS e
MATCH (t:Pattern {id: e.b})
FOREACH (_ IN CASE WHEN e.t = 'OLD_BELIEF' THEN [1] ELSE [] END | MERGE (n)-[:OLD_BELIEF]->(t))
FOREACH (_ IN CASE WHEN e.t = 'NEW_BELIEF' THEN [1] ELSE [] END | MERGE (n)-[:NEW_BELIEF]->(t))

// -- restore_tombstone --
UNWIND $rows AS r
MATCH (n:Tombstone {id: r.key})
SET n = r.props

// -- restore_entity --
UNWIND $rows AS r
MATCH (n:Entity {key: r.key})
SET n = r.props

// -- restore_meta --
UNWIND $rows AS r
MERGE (n:Meta {key: r.key})
SET n = r.props

// -- delete_created_pattern --
UNWIND $keys AS k
MATCH (n:Pattern {id: k})
DETACH DELETE n

// -- delete_created_contradiction --
UNWIND $keys AS k
MATCH (n:Contradiction {id: k})
DETACH DELETE n

// -- delete_created_tombstone --
UNWIND $keys AS k
MATCH (n:Tombstone {id: k})
DELETE n

// -- delete_created_meta --
UNWIND $keys AS k
MATCH (n:Meta {key: k})
DELETE n

// -- delete_created_entity --
// Only once nothing links it (the patterns the change created are gone by now).
UNWIND $keys AS k
MATCH (n:Entity {key: k})
OPTIONAL MATCH (n)-[x]-()
WITH n, count(x) AS rels
WHERE rels = 0
DELETE n

// -- mark_undone --
MATCH (c:Change {id: $id})
WHERE c.undone_at IS NULL
SET c.undone_at = $at, c.undone_by = $by, c.undo_reason = $reason

// -- archived_texts --
UNWIND $ids AS id
MATCH (a:Archived {item: 'Episode|' + id})
WHERE a.text IS NOT NULL
MATCH (c:Change {id: a.change})
RETURN id, a.text AS text, c.seq AS seq, c.id AS change

// -- purge_changes --
MATCH (c:Change)
WHERE c.at < $before AND c.purged_at IS NULL
SET c.purged_at = $at
RETURN c.id AS id

// -- purge_images --
MATCH (a:Archived)
WHERE a.at < $before
WITH a LIMIT 5000
DELETE a
RETURN count(*) AS n

// -- forget_archived --
UNWIND $items AS item
MATCH (a:Archived {item: item})
DELETE a
RETURN count(*) AS n

// -- archive_counts --
MATCH (a:Archived)
RETURN count(a) AS items, sum(CASE WHEN a.text IS NULL THEN 0 ELSE 1 END) AS texts,
       sum(a.bytes + coalesce(a.text_bytes, 0)) AS bytes,
       count(DISTINCT a.change) AS changes, min(a.at) AS oldest

// -- team_archive_counts --
MATCH (a:Archived)
WHERE a.team = $team
RETURN count(a) AS items, sum(CASE WHEN a.text IS NULL THEN 0 ELSE 1 END) AS texts,
       sum(a.bytes + coalesce(a.text_bytes, 0)) AS bytes,
       count(DISTINCT a.change) AS changes, min(a.at) AS oldest

// -- revive_episodes --
// Raw again with the archived text; one property cleared per SET (FalkorDB 4.16 clears the wrong
// properties when one SET clears several).
UNWIND $rows AS r
MATCH (e:Episode {id: r.id})
WHERE e.status IN ['retired', 'pruned']
SET e.status = 'raw', e.text = r.text, e.schema_absorbed = 0
SET e.absorbed_at = null
SET e.absorbed_by = null
SET e.retired_at = null
WITH e
OPTIONAL MATCH (t:Tombstone {id: e.id})
FOREACH (x IN CASE WHEN t IS NULL THEN [] ELSE [t] END | DELETE x)

// -- delete_team_archive --
MATCH (n:Archived) WHERE n.team = $team WITH n LIMIT 5000 DELETE n RETURN count(*) AS n

// -- delete_team_changes --
MATCH (n:Change) WHERE n.teams = [$team] WITH n LIMIT 5000 DELETE n RETURN count(*) AS n

// -- team_changes --
MATCH (c:Change) WHERE $team IN c.teams RETURN properties(c) AS c

// -- team_archived --
MATCH (a:Archived) WHERE a.team = $team RETURN properties(a) AS a

// -- restore_changes --
UNWIND $rows AS r
MERGE (c:Change {id: r.id})
ON CREATE SET c += r.props
