// -- ping --
RETURN 1 AS ok

// -- teams --
MATCH (e:Episode) WHERE e.stage IS NULL RETURN DISTINCT e.team AS team
UNION
MATCH (p:Pattern) RETURN DISTINCT p.team AS team

// -- has_team --
MATCH (e:Episode) WHERE e.team = $team AND e.stage IS NULL RETURN 1 AS ok LIMIT 1
UNION
MATCH (p:Pattern) WHERE p.team = $team RETURN 1 AS ok LIMIT 1

// -- count_episodes_by_status --
MATCH (n:Episode) RETURN n.status AS status, count(n) AS n

// -- count_patterns_by_status --
MATCH (n:Pattern) RETURN n.status AS status, count(n) AS n

// -- count_contradictions_by_status --
MATCH (n:Contradiction) RETURN n.status AS status, count(n) AS n

// -- team_count_episodes_by_status --
MATCH (n:Episode) WHERE n.team = $team RETURN n.status AS status, count(n) AS n

// -- team_count_patterns_by_status --
MATCH (n:Pattern) WHERE n.team = $team RETURN n.status AS status, count(n) AS n

// -- team_count_contradictions_by_status --
MATCH (n:Contradiction) WHERE n.team = $team RETURN n.status AS status, count(n) AS n

// -- team_count_tombstones --
MATCH (n:Tombstone) WHERE n.team = $team RETURN count(n) AS n

// -- count_entities --
MATCH (n:Entity) RETURN count(n) AS n

// -- count_tombstones --
MATCH (n:Tombstone) RETURN count(n) AS n

// -- count_relationships --
MATCH ()-[r]->() RETURN count(r) AS n

// -- snapshot_nodes --
MATCH (n) RETURN labels(n) AS labels, properties(n) AS props

// -- snapshot_relationships --
MATCH (a)-[r]->(b) RETURN labels(a) AS la, coalesce(a.id, a.key) AS a, type(r) AS type, properties(r) AS props, labels(b) AS lb, coalesce(b.id, b.key) AS b

// -- delete_some --
MATCH (n) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- quarantine_episodes --
UNWIND $rows AS r
MATCH (n:Episode {id: r.id})
WHERE coalesce(n.status, '') <> 'quarantined'
SET n.quarantined_from = n.status, n.status = 'quarantined', n.quarantined_at = $at, n.quarantine_reason = r.reason

// -- quarantine_patterns --
UNWIND $rows AS r
MATCH (n:Pattern {id: r.id})
WHERE coalesce(n.status, '') <> 'quarantined'
SET n.quarantined_from = n.status, n.status = 'quarantined', n.quarantined_at = $at, n.quarantine_reason = r.reason

// -- quarantine_contradictions --
UNWIND $rows AS r
MATCH (n:Contradiction {id: r.id})
WHERE coalesce(n.status, '') <> 'quarantined'
SET n.quarantined_from = n.status, n.status = 'quarantined', n.quarantined_at = $at, n.quarantine_reason = r.reason

// -- tombstones --
MATCH (t:Tombstone) WHERE t.team = $team RETURN properties(t) AS t

// -- restore_tombstones --
UNWIND $rows AS r
MERGE (t:Tombstone {id: r.id})
ON CREATE SET t += r.props

// -- delete_team_episodes --
MATCH (n:Episode) WHERE n.team = $team WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_patterns --
MATCH (n:Pattern) WHERE n.team = $team WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_contradictions --
MATCH (n:Contradiction) WHERE n.team = $team WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_tombstones --
MATCH (n:Tombstone) WHERE n.team = $team WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_alerts --
MATCH (n:Alert) WHERE n.team = $team WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_entities --
MATCH (n:Entity) WHERE n.team = $team OR n.key STARTS WITH $prefix WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- delete_team_meta --
MATCH (n:Meta) WHERE n.key ENDS WITH $suffix WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS n

// -- team_patterns_live --
MATCH (n:Pattern) WHERE n.status IN ['tentative', 'active', 'contested'] RETURN n.team AS team, count(n) AS n

// -- team_contradictions_open --
MATCH (n:Contradiction) WHERE n.status = 'open' RETURN n.team AS team, count(n) AS n
