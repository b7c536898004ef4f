-- SQLite statements of dblock. {t} is the quoted lock table, {q} its ticket
-- table, {fence} its token floor, {now} the clock in microseconds,
-- {expired} the condition of a row whose lease has ended, {free} that of a
-- row anyone may take; values are ?n parameters.

-- name: held
SELECT token FROM {t} WHERE key_id = ?1 AND memo <> ?2 AND depth > 0 AND NOT ({expired})

-- name: heldKeys
SELECT key_id FROM {t} WHERE key_id IN (SELECT value FROM json_each(?1)) AND memo <> ?2 AND depth > 0 AND NOT ({expired})

-- name: acquire
-- In DO UPDATE, bare columns are the stored row, excluded.* the new one;
-- every SET expression sees the stored row.
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time, acquired_time, data)
SELECT ?1, ?2, 1, f.floor_token + 1, ?3, {now}, {now}, ?4 FROM {fence} AS f WHERE f.id = 1
ON CONFLICT (key_id) DO UPDATE SET
  memo = excluded.memo,
  data = CASE WHEN {free} THEN excluded.data ELSE coalesce(excluded.data, data) END,
  depth = CASE WHEN {free} THEN 1 ELSE depth + 1 END,
  token = CASE WHEN {free} THEN token + 1 ELSE token END,
  lease_ms = CASE WHEN {free} THEN excluded.lease_ms ELSE max(lease_ms, excluded.lease_ms) END,
  update_time = excluded.update_time,
  acquired_time = CASE WHEN {free} THEN excluded.acquired_time ELSE acquired_time END
WHERE {free} OR memo = excluded.memo
RETURNING token

-- name: release
UPDATE {t} SET
  depth = depth - 1,
  memo = CASE WHEN depth = 1 THEN '' ELSE memo END,
  lease_ms = CASE WHEN depth = 1 THEN 0 ELSE lease_ms END,
  update_time = CASE WHEN depth = 1 THEN {now} ELSE update_time END
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth > 0 AND NOT ({expired})

-- name: handoff
UPDATE {t} SET
  memo = ?4, depth = 1, token = token + 1, lease_ms = ?5, data = ?6,
  update_time = {now}, acquired_time = {now}
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth = 1 AND NOT ({expired})
RETURNING token

-- name: renew
-- The acquisitions come as one JSON array of [key, token] pairs, so the
-- statement text and its single parameter do not depend on the batch size.
-- {lease} is empty for the heartbeat; Lock.Extend's renewal (renewLease)
-- also lengthens the lease to at least ?2 ms, never shortening it.
UPDATE {t} SET update_time = {now}{lease}
WHERE (key_id, token) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) AS j)
  AND depth > 0 AND NOT ({expired})
RETURNING key_id, token

-- name: reap
DELETE FROM {t} WHERE key_id IN (
  SELECT key_id FROM {t} WHERE depth = 0 OR {expired} LIMIT ?1)
RETURNING key_id

-- name: queue.enqueue
INSERT INTO {q} (key_id, memo, lease_ms, update_time) VALUES (?1, ?2, ?3, {now})

-- name: queue.state
SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {q} WHERE key_id = ?1 AND ticket < ?2 AND {live} LIMIT 8)),
  EXISTS (SELECT 1 FROM {q} WHERE ticket = ?3 AND {live}),
  COALESCE((SELECT token FROM {t} WHERE key_id = ?4 AND depth > 0 AND NOT ({expired})), 0),
  g.token, COALESCE(g.age, 0)
FROM (SELECT 1) AS one LEFT JOIN (
  SELECT token, {now} - update_time AS age
  FROM {t} WHERE key_id = ?5 AND memo = ?6 AND depth > 0 AND NOT ({expired})) AS g ON true

-- name: queue.renew
UPDATE {q} SET update_time = {now} WHERE ticket IN ({list}) AND {live}

-- name: queue.dequeue
DELETE FROM {q} WHERE ticket = ?1

-- name: queue.forget
DELETE FROM {q} WHERE key_id = ?1 AND memo = ?2

-- name: queue.reap
DELETE FROM {q} WHERE ticket IN (SELECT ticket FROM {q} WHERE NOT ({live}) LIMIT {limit})

-- The token of (key, memo)'s live row, if any.
-- name: owned
SELECT token FROM {t} WHERE key_id = ?1 AND memo = ?2 AND depth > 0 AND NOT ({expired})

-- name: get
SELECT {cols} FROM {t} WHERE key_id = ?1 AND depth > 0 AND NOT ({expired})

-- name: setData
UPDATE {t} SET data = ?4
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth > 0 AND NOT ({expired})

-- name: takeAny
UPDATE {t} SET memo = ?2, depth = 1, token = token + 1, lease_ms = ?3,
  update_time = {now}, acquired_time = {now}, data = NULL
WHERE key_id = (SELECT key_id FROM {t} WHERE key_id IN (SELECT value FROM json_each(?1)) AND {free} LIMIT 1)
RETURNING key_id, token

-- name: existing
SELECT key_id FROM {t} WHERE key_id IN (SELECT value FROM json_each(?1))

-- name: ensure
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
SELECT j.value, '', 0, f.floor_token + 1, 0, {now} FROM {fence} AS f, json_each(?1) AS j WHERE f.id = 1
ON CONFLICT (key_id) DO NOTHING

-- Waiter records (WaiterSQL): {w} the waiter table, {wlive} a live record w.
-- name: waiters.insert
-- {rows}: one row per record (WaiterSQL.Insert).
INSERT INTO {w} (waiter, key_id, memo, holds, ticket, since_time, lease_ms, update_time, data) VALUES {rows}

-- name: waiters.renew
UPDATE {w} AS w SET update_time = {now} WHERE w.waiter IN ({list}) AND {wlive}

-- name: waiters.ticket
UPDATE {w} SET ticket = ?1 WHERE waiter = ?2

-- name: waiters.delete
DELETE FROM {w} WHERE waiter IN ({list})

-- name: waiters.list
SELECT w.waiter, w.key_id, w.memo, w.holds, w.ticket,
  CASE WHEN w.ticket > 0 THEN (SELECT COUNT(*) FROM {q} q WHERE q.key_id = w.key_id AND q.ticket <= w.ticket
    AND q.update_time + q.lease_ms * 1000 > {now}) ELSE 0 END,
  {now} - w.since_time, w.update_time + w.lease_ms * 1000 - {now}, {now}, w.data
FROM {w} w WHERE (?1 = '' OR w.key_id = ?1) AND {wlive}
ORDER BY w.key_id, w.since_time, w.waiter

-- name: waiters.reap
DELETE FROM {w} WHERE waiter IN (SELECT w.waiter FROM {w} w WHERE NOT ({wlive}) LIMIT {limit})

-- History (HistorySQL): {h} the history table.
-- name: history.list
SELECT h.id, h.event_time, h.key_id, h.event, h.memo, h.token, h.depth, h.held_ms, h.detail
FROM {h} h WHERE (?1 = '' OR h.key_id = ?1) AND h.event_time >= ?2
ORDER BY h.id LIMIT ?3

-- name: history.reap
DELETE FROM {h} WHERE id IN (SELECT h.id FROM {h} h WHERE h.event_time < {now} - ?1 * 1000 LIMIT {limit})

-- name: history.on
SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?1 AND name = ?2

-- name: history.label
UPDATE {h} SET event = 'force-unlocked', detail = ?1 WHERE key_id = ?2 AND token = ?3 AND event = 'released' AND depth = 0
