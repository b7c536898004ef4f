-- PostgreSQL statements of dblock. {t} is the quoted lock table, {q} its
-- ticket table, {seq} its token sequence (as a string literal), {expired}
-- the condition of a row whose lease has ended; values are $n parameters.

-- name: acquire
-- The acquire holds the table's reap fence (a shared advisory lock, to the
-- end of its transaction) before it draws the insert token; see reap.
-- Then it sets lock_timeout for the rest of its own transaction (the
-- statement), so that a row lock or an uncommitted insert of another
-- transaction (LockTx) fails it at once with 55P03, read as "held",
-- instead of keeping it waiting; see take.
WITH fence AS (SELECT pg_advisory_xact_lock_shared($4), set_config('lock_timeout', '1ms', true))
INSERT INTO {t} AS l (key_id, memo, depth, token, lease_ms, update_time, acquired_time, data)
SELECT $1, $2, 1, nextval('{seq}'), $3, statement_timestamp(), statement_timestamp(), $5::bytea FROM fence
ON CONFLICT (key_id) DO UPDATE SET
  memo = EXCLUDED.memo,
  data = CASE WHEN l.depth = 0 OR {expired} THEN EXCLUDED.data ELSE COALESCE(EXCLUDED.data, l.data) END,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN EXCLUDED.lease_ms ELSE GREATEST(l.lease_ms, EXCLUDED.lease_ms) END,
  update_time = EXCLUDED.update_time,
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN EXCLUDED.acquired_time ELSE l.acquired_time END
WHERE l.depth = 0 OR {expired} OR l.memo = EXCLUDED.memo
RETURNING token

-- name: take
-- takeSQL is the acquire of a key whose row is in place (a key in use:
-- released rows stay until reaped). It is the upsert's DO UPDATE alone,
-- without the upsert's speculative-insert check and tuple lock, and it
-- needs no reap fence: the token is drawn on the locked row. The
-- one-row FROM sets lock_timeout for the statement's own transaction
-- before any row is locked: a row another transaction holds locked (a
-- LockTx, a write in flight) fails the take with 55P03 at once, read as
-- "held", so no take waits for a transaction, and none is left waiting
-- to take the key after its caller gave up.
UPDATE {t} AS l SET
  memo = $2,
  data = CASE WHEN l.depth = 0 OR {expired} THEN $4::bytea ELSE COALESCE($4::bytea, l.data) END,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN $3 ELSE GREATEST(l.lease_ms, $3) END,
  update_time = statement_timestamp(),
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN statement_timestamp() ELSE l.acquired_time END
FROM (SELECT set_config('lock_timeout', '1ms', true)) AS nowait
WHERE l.key_id = $1 AND (l.depth = 0 OR {expired} OR l.memo = $2)
RETURNING l.token

-- name: release
UPDATE {t} AS l SET
  depth = l.depth - 1,
  memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
  lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
  update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
{async}
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})

-- name: takeMany
-- takeMany is takeSQL for many keys, each with its own memo, listed in
-- VALUES, one row of scalar parameters per key; the keys come sorted, so
-- that two batches lock shared rows in one order. Scalars, not arrays:
-- with an array, each execution's custom plan (estimated from the
-- array's length) looks cheaper than the generic one (estimated for 10
-- elements), so PostgreSQL plans the statement again at every execution,
-- about 70 µs of server CPU; with scalars the generic plan, a nested loop
-- over the primary key, is kept after the first few executions. Batches
-- are padded (padded) with rows of NULLs, which join nothing.
UPDATE {t} AS l SET
  memo = b.owner,
  data = CASE WHEN l.depth = 0 OR {expired} THEN NULL ELSE l.data END,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN $1 ELSE GREATEST(l.lease_ms, $1) END,
  update_time = statement_timestamp(),
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN statement_timestamp() ELSE l.acquired_time END
FROM (VALUES {rows}) AS b(key_id, owner), (SELECT set_config('lock_timeout', '1ms', true)) AS nowait
WHERE l.key_id = b.key_id AND (l.depth = 0 OR {expired} OR l.memo = b.owner)
RETURNING l.key_id, l.token

-- name: releaseMany
-- releaseMany is releaseSQL for many acquisitions, listed as takeMany's.
UPDATE {t} AS l SET
  depth = l.depth - 1,
  memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
  lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
  update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
FROM {asyncJoin}(VALUES {rows}) AS b(key_id, owner, token)
WHERE l.key_id = b.key_id AND l.memo = b.owner AND l.token = b.token AND l.depth > 0 AND NOT ({expired})
RETURNING l.key_id

-- name: held
SELECT l.token FROM {t} AS l WHERE l.key_id = $1 AND l.memo <> $2 AND l.depth > 0 AND NOT ({expired})

-- name: heldKeys
SELECT l.key_id FROM {t} AS l WHERE l.key_id = ANY($1::text[]) AND l.memo <> $2 AND l.depth > 0 AND NOT ({expired})

-- name: handoff
-- The handover draws its token after the row lock is held (SET runs on
-- the locked row), so it needs no reap fence: it never inserts.
UPDATE {t} AS l SET
  memo = $4, depth = 1, token = nextval('{seq}'), lease_ms = $5, data = $6::bytea,
  update_time = statement_timestamp(), acquired_time = statement_timestamp()
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth = 1 AND NOT ({expired})
RETURNING l.token

-- name: releaseNotify
-- The same, notifying dblock_<table> with "F:<locker>:<tag>" when the last
-- level goes, in the same transaction, so waiters wake at commit. Used
-- only when someone waits: PostgreSQL serialises the commits of all
-- notifying transactions, which would otherwise cost every release.
WITH r AS (
  UPDATE {t} AS l SET
    depth = l.depth - 1,
    memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
    lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
    update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
  {async}
  WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})
  RETURNING l.depth),
n AS (SELECT pg_notify($4, 'F:' || $5 || ':' || $6) FROM r WHERE r.depth = 0)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)

-- name: renew
-- renewSQL skips rows another transaction has locked (a Lock.Check share
-- lock, a takeover in flight) instead of waiting for them. It returns
-- each acquisition still ours when the statement started (false) and
-- each it renewed (true), as two lists: a join of the two, planned as a
-- nested loop over CTEs, cost the square of the locks (5.7 s for 10,000).
-- {lease} is empty for the heartbeat; Lock.Extend's renewal (renewLease)
-- also lengthens the lease to at least $3 ms, never shortening it.
WITH h AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS h(key_id, token)),
live AS (
  SELECT l.key_id, l.token FROM {t} AS l JOIN h ON l.key_id = h.key_id AND l.token = h.token
  WHERE l.depth > 0 AND NOT ({expired})),
got AS (
  SELECT l.key_id FROM {t} AS l JOIN live ON l.key_id = live.key_id AND l.token = live.token
  WHERE l.depth > 0 AND NOT ({expired})
  FOR UPDATE OF l SKIP LOCKED),
upd AS (
  UPDATE {t} AS l SET update_time = statement_timestamp(){lease} FROM got
  WHERE l.key_id = got.key_id
  RETURNING l.key_id, l.token)
SELECT key_id, token, true FROM upd
UNION ALL
SELECT key_id, token, false FROM live

-- name: reap
DELETE FROM {t} AS l WHERE l.key_id IN (
  SELECT l.key_id FROM {t} AS l WHERE l.depth = 0 OR {expired}
  LIMIT $1 FOR UPDATE SKIP LOCKED)
AND (l.depth = 0 OR {expired})
RETURNING l.key_id, l.depth > 0

-- name: tx.rowNowait
SELECT 1 FROM {t} AS l WHERE l.key_id = $1 AND (l.depth = 0 OR {expired}) FOR UPDATE NOWAIT

-- name: tx.take
UPDATE {t} AS l SET
  token = nextval('{seq}'), memo = '', depth = 0, lease_ms = 0, update_time = statement_timestamp()
WHERE l.key_id = $1 AND (l.depth = 0 OR {expired})
RETURNING l.token

-- name: tx.create
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
VALUES ($1, '', 0, nextval('{seq}'), 0, statement_timestamp())
ON CONFLICT (key_id) DO NOTHING

-- name: tx.check
SELECT 1 FROM {t} AS l
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})
{checkLock}

-- name: queue.enqueue
INSERT INTO {q} (key_id, memo, lease_ms) VALUES ($1, $2, $3) RETURNING ticket

-- name: queue.state
SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {q} q WHERE q.key_id = $1 AND q.ticket < $2 AND {live} LIMIT 8) a),
  EXISTS (SELECT 1 FROM {q} q WHERE q.ticket = $3 AND {live}),
  COALESCE((SELECT l.token FROM {t} l WHERE l.key_id = $4 AND l.depth > 0 AND NOT ({expired})), 0),
  g.token, COALESCE(g.age, 0)
FROM (SELECT 1) AS one LEFT JOIN (
  SELECT l.token, (EXTRACT(EPOCH FROM statement_timestamp() - l.update_time) * 1000000)::bigint AS age
  FROM {t} l WHERE l.key_id = $5 AND l.memo = $6 AND l.depth > 0 AND NOT ({expired})) AS g ON true

-- name: queue.pass
-- releaseNotify that passes the key to the oldest live ticket, when that
-- ticket is grantable (its memo is "g:" and the waiter's owner memo) and
-- the release takes the last level: the row moves to the waiter's memo
-- with a token drawn on the locked row (as a handover's), the ticket's
-- lease, and the ticket goes, all in one durable commit. The ticket is
-- locked first, so a waiter that deletes it to leave either finds it gone
-- (granted: it then releases what it was given) or deletes it before any
-- grant. It notifies "G:<locker>:<tag>:<ticket>" for a grant to another
-- ticket than $7 (the releasing Locker's, which it hands over itself),
-- else as releaseNotify does. It returns (rows released, ticket granted, its
-- token), NULLs when it granted nothing.
WITH n AS (
  SELECT q.ticket, q.memo, q.lease_ms FROM {q} q
  WHERE q.key_id = $1 AND {live}
  ORDER BY q.ticket LIMIT 1
  FOR UPDATE),
g AS (SELECT n.ticket, substr(n.memo, 3) AS owner, n.lease_ms FROM n WHERE n.memo LIKE 'g:%'),
r AS (
  UPDATE {t} AS l SET
    depth = CASE WHEN l.depth = 1 AND g.ticket IS NOT NULL THEN 1 ELSE l.depth - 1 END,
    memo = CASE WHEN l.depth > 1 THEN l.memo WHEN g.ticket IS NOT NULL THEN g.owner ELSE '' END,
    token = CASE WHEN l.depth = 1 AND g.ticket IS NOT NULL THEN nextval('{seq}') ELSE l.token END,
    lease_ms = CASE WHEN l.depth > 1 THEN l.lease_ms WHEN g.ticket IS NOT NULL THEN g.lease_ms ELSE 0 END,
    data = CASE WHEN l.depth = 1 AND g.ticket IS NOT NULL THEN NULL ELSE l.data END,
    update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END,
    acquired_time = CASE WHEN l.depth = 1 AND g.ticket IS NOT NULL THEN statement_timestamp() ELSE l.acquired_time END
  FROM (SELECT 1) AS one LEFT JOIN g ON true
  WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})
  RETURNING l.depth, l.token, CASE WHEN l.memo <> $2 THEN g.ticket END AS granted),
d AS (DELETE FROM {q} q USING r WHERE q.ticket = r.granted),
x AS (SELECT pg_notify($4, CASE WHEN r.granted IS NULL THEN 'F:' || $5 || ':' || $6
    ELSE 'G:' || $5 || ':' || $6 || ':' || r.granted END)
  FROM r WHERE r.depth = 0 OR r.granted <> $7::bigint)
SELECT (SELECT count(*) FROM r), (SELECT max(r.granted) FROM r),
  (SELECT max(r.token) FROM r WHERE r.granted IS NOT NULL), (SELECT count(*) FROM x)

-- name: queue.renew
UPDATE {q} q SET update_time = statement_timestamp() WHERE q.ticket IN ({list}) AND {live}

-- name: queue.dequeue
DELETE FROM {q} WHERE ticket = $1

-- name: queue.forget
DELETE FROM {q} WHERE key_id = $1 AND memo = $2

-- name: queue.reap
DELETE FROM {q} WHERE ticket IN (SELECT q.ticket FROM {q} q WHERE NOT ({live}) LIMIT {limit})

-- The token of (key, memo)'s live row, if any.
-- name: owned
SELECT token FROM {t} l WHERE l.key_id = $1 AND l.memo = $2 AND l.depth > 0 AND NOT ({expired})

-- name: get
SELECT {cols} FROM {t} AS l WHERE l.key_id = $1 AND l.depth > 0 AND NOT ({expired})

-- name: setData
UPDATE {t} AS l SET data = $4::bytea
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})

-- name: takeAny
-- A semaphore's permit: one free row among $1, skipping rows another
-- statement is taking; random order spreads concurrent takers.
WITH c AS (
  SELECT l.key_id FROM {t} AS l
  WHERE l.key_id = ANY($1::text[]) AND (l.depth = 0 OR {expired})
  ORDER BY random() LIMIT 1
  FOR UPDATE SKIP LOCKED)
UPDATE {t} AS l SET memo = $2, depth = 1, token = nextval('{seq}'), lease_ms = $3,
  update_time = statement_timestamp(), acquired_time = statement_timestamp(), data = NULL
FROM c WHERE l.key_id = c.key_id AND (l.depth = 0 OR {expired})
RETURNING l.key_id, l.token

-- name: existing
SELECT l.key_id FROM {t} AS l WHERE l.key_id = ANY($1::text[])

-- name: ensure
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
SELECT k, '', 0, nextval('{seq}'), 0, statement_timestamp() FROM unnest($1::text[]) AS k
ON CONFLICT (key_id) DO NOTHING

-- Waiter records (WaiterSQL): {w} the waiter table, {wlive} a live record w.
-- name: waiters.insert
-- {rows}: one row per record (WaiterSQL.Insert).
INSERT INTO {w} (waiter, key_id, memo, holds, ticket, since_time, lease_ms, update_time, data) VALUES {rows}

-- name: waiters.renew
UPDATE {w} w SET update_time = statement_timestamp() WHERE w.waiter IN ({list}) AND {wlive}

-- name: waiters.ticket
UPDATE {w} SET ticket = $1 WHERE waiter = $2

-- name: waiters.delete
DELETE FROM {w} WHERE waiter IN ({list})

-- name: waiters.list
SELECT w.waiter, w.key_id, w.memo, w.holds, w.ticket,
  CASE WHEN w.ticket > 0 THEN (SELECT COUNT(*) FROM {q} q WHERE q.key_id = w.key_id AND q.ticket <= w.ticket AND {live}) ELSE 0 END,
  (EXTRACT(EPOCH FROM (statement_timestamp() - w.since_time)) * 1000000)::bigint,
  (EXTRACT(EPOCH FROM (w.update_time + w.lease_ms * interval '1 millisecond' - statement_timestamp())) * 1000000)::bigint,
  (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint, w.data
FROM {w} w WHERE ($1::text = '' OR w.key_id = $1::text) AND {wlive}
ORDER BY w.key_id COLLATE "C", w.since_time, w.waiter

-- name: waiters.reap
DELETE FROM {w} WHERE waiter IN (SELECT w.waiter FROM {w} w WHERE NOT ({wlive}) LIMIT {limit})

-- History (HistorySQL): {h} the history table.
-- name: history.list
SELECT h.id, (EXTRACT(EPOCH FROM h.event_time) * 1000000)::bigint, h.key_id, h.event, h.memo, h.token, h.depth, h.held_ms, h.detail
FROM {h} h WHERE ($1::text = '' OR h.key_id = $1::text) AND h.event_time >= to_timestamp($2::bigint / 1000000.0)
ORDER BY h.id LIMIT $3

-- name: history.reap
DELETE FROM {h} WHERE id IN (SELECT h.id FROM {h} h WHERE h.event_time < statement_timestamp() - $1::bigint * interval '1 millisecond' LIMIT {limit})

-- name: history.on
-- The history's trigger on the lock table ($1, quoted; $2, its name).
SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2

-- name: history.label
-- Read by the history's trigger (schema/history/postgres.sql).
SELECT set_config('dblock.force', $1, true)
