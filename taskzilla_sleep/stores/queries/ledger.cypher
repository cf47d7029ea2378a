// -- get_meta --
MATCH (m:Meta {key: $key}) RETURN m.value AS value

// -- set_meta --
MERGE (m:Meta {key: $key}) SET m.value = $value

// -- finish_journal --
MERGE (m:Meta {key: $key}) SET m.value = $value
MERGE (j:Meta {key: $journal}) SET j.value = ''

// -- update_patterns_and_meta --
MERGE (m:Meta {key: $key}) SET m.value = $value
WITH m
UNWIND $rows AS row
MATCH (p:Pattern {id: row.id})
SET p += row.set

// -- save_run --
MERGE (r:Run {id: $id}) SET r += $props

// -- get_run --
MATCH (r:Run {id: $id}) RETURN properties(r) AS r

// -- runs --
MATCH (r:Run) RETURN properties(r) AS r ORDER BY r.started_at DESC LIMIT $n

// -- runs_of_teams --
MATCH (r:Run) WHERE r.team IN $teams RETURN properties(r) AS r ORDER BY r.started_at DESC LIMIT $n

// -- night_runs --
MATCH (r:Run) WHERE coalesce(r.dry_run, false) = false
WITH coalesce(r.slot, 'run:' + r.id) AS night, min(r.started_at) AS first
ORDER BY first DESC, night DESC LIMIT $n
WITH collect(night) AS nights
MATCH (r:Run) WHERE coalesce(r.dry_run, false) = false AND coalesce(r.slot, 'run:' + r.id) IN nights
RETURN properties(r) AS r ORDER BY r.started_at DESC

// -- slot_done --
MATCH (r:Run) WHERE r.slot = $slot AND r.ok = true RETURN count(r) AS n

// -- slot_runs --
MATCH (r:Run) WHERE r.slot = $slot RETURN properties(r) AS r ORDER BY r.started_at

// -- slot_team_runs --
MATCH (r:Run) WHERE r.slot = $slot AND (r.team IS NULL OR r.team = $team)
RETURN properties(r) AS r ORDER BY r.started_at

// -- unfinished_runs --
MATCH (r:Run) WHERE r.finished_at IS NULL RETURN properties(r) AS r

// -- unfinished_team_runs --
MATCH (r:Run) WHERE r.finished_at IS NULL AND r.team = $team RETURN properties(r) AS r
