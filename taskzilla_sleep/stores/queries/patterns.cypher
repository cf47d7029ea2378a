// -- patterns --
MATCH (p:Pattern)
WHERE p.team = $team
RETURN properties(p) AS p

// -- patterns_by_id --
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
RETURN properties(p) AS p

// -- pattern_cards --
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
RETURN p.id AS id, p.team AS team, p.statement AS statement, p.status AS status, p.pinned AS pinned,
       p.subjects AS subjects, p.confidence AS confidence, p.support_count AS support_count

// -- live_pattern_texts --
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
WHERE p.team = $team AND p.status IN $live
RETURN p.id AS id, p.statement AS text

// -- live_pattern_ids --
MATCH (p:Pattern) WHERE p.team = $team AND p.status IN $live RETURN collect(p.id) AS ids

// -- write_pattern --
MERGE (p:Pattern {id: $id})
SET p += $props
FOREACH (k IN $subject_keys | MERGE (n:Entity {key: k}) MERGE (p)-[:ABOUT]->(n))
WITH p
UNWIND $evidence AS row
MATCH (e:Episode {id: row.id})
MERGE (p)-[:EVIDENCED_BY]->(e)
SET e += row.set

// -- update_patterns --
UNWIND $rows AS row
MATCH (p:Pattern {id: row.id})
SET p += row.set

// -- merge_patterns --
MATCH (keep:Pattern {id: $keep}), (drop:Pattern {id: $drop})
SET keep += $keep_props, drop += $drop_props
MERGE (drop)-[:MERGED_INTO]->(keep)
MERGE (t:Tombstone {id: $drop})
ON CREATE SET t.kind = 'pattern', t.team = drop.team, t.at = $at, t.reason = 'merged', t.pattern_id = $keep
WITH keep
UNWIND $moved AS row
MATCH (e:Episode {id: row.id})
MERGE (keep)-[:EVIDENCED_BY]->(e)
SET e += row.set

// -- link_refines --
MATCH (a:Pattern {id: $a}), (b:Pattern {id: $b}) MERGE (a)-[:REFINES]->(b)

// -- link_compatible --
MATCH (a:Pattern {id: $a}), (b:Pattern {id: $b}) MERGE (a)-[:COMPATIBLE_WITH]->(b)

// -- pattern_links --
MATCH (a:Pattern)-[r]->(b:Pattern)
WHERE a.team = $team
RETURN a.id AS a, type(r) AS rel, b.id AS b, r.prompt AS prompt

// -- link_unrelated --
UNWIND $rows AS row
MATCH (a:Pattern {id: row.a}), (b:Pattern {id: row.b})
MERGE (a)-[r:UNRELATED_TO]->(b)
SET r.prompt = $prompt

// -- entity_neighbours --
MATCH (p:Pattern {id: $id})-[:ABOUT]->(n:Entity)<-[:ABOUT]-(q:Pattern)
WHERE q.id <> p.id AND q.status IN $live
RETURN DISTINCT q.id AS id

// -- mark_patterns_accessed --
UNWIND $ids AS id MATCH (p:Pattern {id: id}) SET p.last_accessed = $at

// -- pattern_edges --
MATCH (p:Pattern)-[r]->(x)
WHERE p.team = $team AND (type(r) = 'ABOUT' OR type(r) = 'EVIDENCED_BY')
RETURN p.id AS id, type(r) AS rel, coalesce(x.id, x.key) AS target

// -- forget_pattern --
// The episodes it absorbed go back to raw (one property cleared per SET: FalkorDB 4.16 clears the
// wrong properties when one SET clears several), then the node goes with its links.
MATCH (p:Pattern {id: $id})
MERGE (t:Tombstone {id: $id})
ON CREATE SET t.kind = 'pattern', t.team = p.team
WITH p, t, t.by IS NULL AS first
SET t.at = CASE WHEN first THEN $at ELSE t.at END,
    t.reason = CASE WHEN first THEN $reason ELSE t.reason END,
    t.by = CASE WHEN first THEN $by ELSE t.by END
WITH p
OPTIONAL MATCH (e:Episode)
WHERE e.team = p.team AND e.status = 'absorbed' AND e.absorbed_by = p.id
WITH p, collect(e) AS eps
FOREACH (e IN eps | SET e.status = 'raw', e.schema_absorbed = 0)
FOREACH (e IN eps | SET e.absorbed_at = null)
FOREACH (e IN eps | SET e.absorbed_by = null)
DETACH DELETE p

// -- restore_pattern_links --
UNWIND $rows AS r
MATCH (a:Pattern {id: r.a}), (b:Pattern {id: r.b})
FOREACH (_ IN CASE WHEN r.rel = 'REFINES' THEN [1] ELSE [] END | MERGE (a)-[:REFINES]->(b))
FOREACH (_ IN CASE WHEN r.rel = 'COMPATIBLE_WITH' THEN [1] ELSE [] END | MERGE (a)-[:COMPATIBLE_WITH]->(b))
FOREACH (_ IN CASE WHEN r.rel = 'MERGED_INTO' THEN [1] ELSE [] END | MERGE (a)-[:MERGED_INTO]->(b))
FOREACH (_ IN CASE WHEN r.rel = 'SUPERSEDES' THEN [1] ELSE [] END | MERGE (a)-[:SUPERSEDES]->(b))
FOREACH (_ IN CASE WHEN r.rel = 'UNRELATED_TO' THEN [1] ELSE [] END | MERGE (a)-[u:UNRELATED_TO]->(b) SET u.prompt = r.prompt)
