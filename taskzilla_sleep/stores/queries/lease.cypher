// -- acquire_lease --
// The first SET takes the node's write lock (Neo4j), so the WHERE below reads the latest committed
// holder: two replicas cannot both see an expired lease and both take it. FalkorDB runs writes one
// at a time, so the same query is atomic there too.
MERGE (l:Lease {name: $name})
SET l.touched_at = $now
WITH l
WHERE l.holder IS NULL OR l.holder = $me OR l.expires_at < $now OR l.holder = $dead
SET l.holder = $me, l.expires_at = $expires, l.host = $host, l.pid_ns = $pid_ns, l.pid = $pid
RETURN l.holder AS holder

// -- release_lease --
MATCH (l:Lease {name: $name})
WHERE l.holder = $me
SET l.holder = null, l.expires_at = 0
RETURN count(l) AS n

// -- lease_holder --
MATCH (l:Lease {name: $name})
RETURN l.holder AS holder, l.expires_at AS expires_at, l.host AS host, l.pid_ns AS pid_ns, l.pid AS pid

// -- mark_ingest --
MERGE (m:IngestMark {id: $id})
SET m += $props

// -- drop_old_ingest_marks --
MATCH (m:IngestMark) WHERE m.expires_at < $before
WITH m LIMIT 1000
DELETE m
RETURN count(*) AS n

// -- ingest_marks --
MATCH (m:IngestMark) WHERE m.expires_at >= $since
RETURN properties(m) AS m

// -- ingest_episodes --
MATCH (e:Episode)
WHERE e.team = $team AND e.ingest IN $ingests AND e.status IN $live
RETURN collect(e.id) AS ids
