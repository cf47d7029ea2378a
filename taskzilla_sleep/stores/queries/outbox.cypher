// -- alerted_open_contradictions --
MATCH (c:Contradiction)
WHERE c.status = 'open'
OPTIONAL MATCH (a:Alert)-[:ALERT_FOR]->(c)
RETURN properties(c) AS c, collect(a.channel) AS channels

// -- queue_contradiction_alerts --
UNWIND $rows AS r
MATCH (c:Contradiction {id: r.contradiction_id})
MERGE (a:Alert {key: r.key})
ON CREATE SET a += r.props
MERGE (a)-[:ALERT_FOR]->(c)

// -- queue_alerts --
UNWIND $rows AS r
MERGE (a:Alert {key: r.key})
ON CREATE SET a += r.props

// -- claim_alert --
MATCH (a:Alert)
WHERE a.status = 'pending' AND a.channel = $channel AND a.next_attempt_at <= $now
WITH a ORDER BY a.next_attempt_at, a.key LIMIT 1
SET a._lock = true
WITH a, (a.status = 'pending' AND a.next_attempt_at <= $now) AS free
SET a._lock = null,
    a.next_attempt_at = CASE WHEN free THEN $until ELSE a.next_attempt_at END,
    a.claimed_at = CASE WHEN free THEN $now ELSE a.claimed_at END
RETURN properties(a) AS p, free

// -- mark_alert_delivered --
MATCH (a:Alert {key: $key})
SET a._lock = true
WITH a, a.status = 'pending' AS todo
SET a._lock = null
WITH a, todo WHERE todo
SET a.status = 'delivered', a.delivered_at = $now, a.last_attempt_at = $now,
    a.attempts = coalesce(a.attempts, 0) + 1, a.last_error = null, a.message_ref = $ref
RETURN a.attempts AS attempts

// -- mark_alert_dropped --
MATCH (a:Alert {key: $key})
SET a._lock = true
WITH a, a.status = 'pending' AS todo
SET a._lock = null
WITH a, todo WHERE todo
SET a.status = 'dropped', a.dropped_reason = $reason
RETURN a.key AS key

// -- mark_alert_failed --
MATCH (a:Alert {key: $key})
SET a._lock = true
WITH a, a.status = 'pending' AS todo
SET a._lock = null
WITH a, todo WHERE todo
SET a.attempts = coalesce(a.attempts, 0) + 1, a.last_attempt_at = $now, a.last_error = $error,
    a.next_attempt_at = $next_at, a.status = CASE WHEN $give_up THEN 'failed' ELSE 'pending' END
RETURN a.attempts AS attempts

// -- defer_alerts --
MATCH (a:Alert)
WHERE a.status = 'pending' AND a.channel = $channel AND a.next_attempt_at < $until
SET a.next_attempt_at = $until
RETURN count(a) AS n

// -- requeue_failed_alerts --
MATCH (a:Alert)
WHERE a.status = 'failed' AND ($keys IS NULL OR a.key IN $keys)
SET a.status = 'pending', a.attempts = 0, a.next_attempt_at = $now, a.last_error = null
RETURN count(a) AS n

// -- count_alerts --
MATCH (a:Alert) WHERE a.status = $status RETURN count(a) AS n

// -- alerts --
MATCH (a:Alert) WHERE $status IS NULL OR a.status = $status RETURN properties(a) AS p

// -- withdraw_alerts --
UNWIND $keys AS k
MATCH (a:Alert {key: k})
SET a.key = k + $suffix,
    a.dropped_reason = CASE WHEN a.status = 'pending' THEN $reason ELSE a.dropped_reason END,
    a.status = CASE WHEN a.status = 'pending' THEN 'dropped' ELSE a.status END

// -- oldest_alert_at --
MATCH (a:Alert) WHERE a.status = $status RETURN min(a.created_at) AS t
