// Console sessions and the chat requests already taken (shared by every replica). Times are epoch ms.

// -- purge_idle_sessions --
MATCH (s:ConsoleSession) WHERE s.last_seen < $idle_before
DELETE s

// -- trim_sessions --
// The least recently seen beyond $keep make room for a new one.
MATCH (s:ConsoleSession)
WITH s ORDER BY s.last_seen DESC, s.key
SKIP $keep
DELETE s

// -- create_session --
CREATE (s:ConsoleSession)
SET s += $props

// -- touch_session --
// The notices are read before they are emptied: a page shows them once.
MATCH (s:ConsoleSession {key: $key})
WHERE s.last_seen >= $idle_before
WITH s, s.notices AS notices
SET s.last_seen = $now, s.notices = CASE WHEN $take THEN null ELSE s.notices END
RETURN properties(s) AS s, notices

// -- add_session_notice --
MATCH (s:ConsoleSession {key: $key})
WITH s, coalesce(s.notices, []) + [$notice] AS notices
SET s.notices = CASE WHEN size(notices) > $keep THEN notices[size(notices) - $keep..] ELSE notices END

// -- end_session --
MATCH (s:ConsoleSession {key: $key})
DELETE s

// -- remember_request --
// The first SET takes the node's write lock (Neo4j), so the WHERE reads the latest committed time: two
// replicas given the same request cannot both take it. FalkorDB runs writes one at a time.
MERGE (r:SeenRequest {key: $key})
SET r.touched_at = $now
WITH r
WHERE r.until IS NULL OR r.until < $now
SET r.until = $until
RETURN count(r) AS fresh

// -- forget_requests --
MATCH (r:SeenRequest) WHERE r.until < $now
WITH r LIMIT 1000
DELETE r
