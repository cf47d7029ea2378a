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
