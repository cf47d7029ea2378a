// -- open_contradiction --
MATCH (o:Pattern {id: $old}), (n:Pattern {id: $new})
MERGE (c:Contradiction {id: $id})
ON CREATE SET c += $props,
    o.counter_count = CASE WHEN o.pinned THEN o.counter_count ELSE coalesce(o.counter_count, 0) + $counter END,
    o.confidence = CASE WHEN o.pinned THEN o.confidence ELSE $old_confidence END
MERGE (c)-[:OLD_BELIEF]->(o)
MERGE (c)-[:NEW_BELIEF]->(n)
SET o.status = CASE WHEN o.pinned THEN o.status ELSE 'contested' END,
    n.status = CASE WHEN n.pinned OR $update THEN n.status ELSE 'contested' END,
    o.updated_at = CASE WHEN o.pinned THEN o.updated_at ELSE $at END,
    n.updated_at = CASE WHEN n.pinned OR $update THEN n.updated_at ELSE $at END

// -- resolve_supersede --
MATCH (c:Contradiction {id: $c.id}), (w:Pattern {id: $w.id}), (l:Pattern {id: $l.id})
SET c += $c, w += $w, l += $l
MERGE (w)-[:SUPERSEDES]->(l)

// -- resolve_keep_both --
MATCH (c:Contradiction {id: $c.id}), (a:Pattern {id: $a.id}), (b:Pattern {id: $b.id})
SET c += $c, a += $a, b += $b

// -- contradictions --
MATCH (c:Contradiction)
WHERE ($team IS NULL OR c.team = $team) AND ($status IS NULL OR c.status = $status)
RETURN properties(c) AS c

// -- patterns_in_dispute --
UNWIND $ids AS id
MATCH (p:Pattern {id: id})
OPTIONAL MATCH (p)<-[:OLD_BELIEF|NEW_BELIEF]-(c:Contradiction)-[:OLD_BELIEF|NEW_BELIEF]->(m:Pattern)
WHERE c.status = 'open'
OPTIONAL MATCH (m)<-[:OLD_BELIEF|NEW_BELIEF]-(d:Contradiction)
WHERE d.status = 'open'
RETURN properties(p) AS p, collect(properties(c)) AS near, collect(properties(d)) AS far

// -- get_contradiction --
MATCH (c:Contradiction {id: $id})
RETURN properties(c) AS c

// -- restore_contradictions --
UNWIND $rows AS r
MERGE (c:Contradiction {id: r.id})
ON CREATE SET c += r.props
WITH c, r
OPTIONAL MATCH (o:Pattern {id: r.old})
OPTIONAL MATCH (n:Pattern {id: r.new})
FOREACH (x IN CASE WHEN o IS NULL THEN [] ELSE [o] END | MERGE (c)-[:OLD_BELIEF]->(x))
FOREACH (x IN CASE WHEN n IS NULL THEN [] ELSE [n] END | MERGE (c)-[:NEW_BELIEF]->(x))
