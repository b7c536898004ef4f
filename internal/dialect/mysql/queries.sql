-- MySQL and MariaDB statements of dblock. {t} is the quoted lock table, {q}
-- its ticket table, {fence} its token floor, {expired} the condition of a
-- row whose lease has ended, {free} that of a row anyone may take; values
-- are ? parameters. {share} is LOCK IN SHARE MODE on MySQL and MariaDB and
-- nothing on TiDB, which refuses it: there an INSERT of a key whose row a
-- reap deleted after the statement read the fence meets a write conflict
-- on that key and runs again, reading the raised fence. {checkLock} is
-- tx.check's share lock, FOR UPDATE on TiDB (whose shared locks are no-ops).
-- {skipLocked} is SKIP LOCKED, and NOWAIT on TiDB, where SKIP LOCKED
-- returns locked rows without locking them (see lockRows).
-- {floor} is what a row the statement inserts starts its tokens above:
-- the fence's floor, and on TiDB, which has no trigger to raise the floor
-- when a row is deleted by hand, at least the statement's start timestamp
-- from the cluster's timestamp oracle (tidbFloor in mysql.go says why that
-- is above every token the deleted row had).

-- name: acquire
-- Its ON DUPLICATE KEY UPDATE assignments give the same result whether they
-- are evaluated left to right (MySQL, MariaDB's default) or all from the old
-- row (MariaDB's SIMULTANEOUS_ASSIGNMENT sql_mode). Let free be "depth = 0 or
-- expired" and ours "memo = our memo". Left to right: token and memo see the
-- old row. After memo is set, "memo = ours" holds exactly when we acquired
-- (a row we did not get keeps another owner's memo), and free still sees the
-- old depth, update_time and lease_ms, so depth is right. acquired_time
-- comes first, where every mode still sees the old row. lease_ms sees the
-- new depth (at least 1 when acquired) but the old update_time and lease_ms:
-- free is then "expired", which differs from the old value only for a
-- released row, whose lease is 0, where GREATEST(0, ttl) = ttl anyway.
-- update_time sees the new lease, but only when we acquired, where "ours"
-- already holds. TestMySQLSimultaneousAssignment checks the second mode.
-- A key held by another owner reports LAST_INSERT_ID(-1), never a token:
-- TiDB ignores LAST_INSERT_ID(0) and would report the first token that
-- the SELECT computed (the row keeps its token either way).
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time, acquired_time, data)
SELECT ?, ?, 1, LAST_INSERT_ID({floor} + 1), ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?
FROM {fence} AS f WHERE f.id = 1 {share}
ON DUPLICATE KEY UPDATE
  acquired_time = IF({free}, UTC_TIMESTAMP(6), acquired_time),
  data = IF({free}, ?, IF(memo = ?, COALESCE(?, data), data)),
  token = IF({free}, LAST_INSERT_ID(token + 1), IF(memo = ?, LAST_INSERT_ID(token), IF(LAST_INSERT_ID(-1), token, token))),
  memo = IF({free} OR memo = ?, ?, memo),
  depth = IF({free} OR memo = ?, IF({free}, 1, depth + 1), depth),
  lease_ms = IF({free} OR memo = ?, IF({free}, ?, GREATEST(lease_ms, ?)), lease_ms),
  update_time = IF({free} OR memo = ?, UTC_TIMESTAMP(6), update_time)

-- name: take
-- takeSQL is the acquire of a released key whose row is in place: no
-- insert attempt, duplicate-key check or fence share lock, and no
-- expressions beyond the token's. MariaDB prepares every expression of a
-- prepared statement again at each execution, so the upsert's IF()s and
-- even an unevaluated lease check cost CPU that 8 goroutines on 2 cores
-- lack. It needs no fence: the token is drawn on the locked row, and
-- WHERE is evaluated before any assignment. A re-entry (the row held by
-- our memo) or a takeover of a lapsed lease takes nothing here and goes
-- on to the upsert.
UPDATE {t} SET
  acquired_time = UTC_TIMESTAMP(6), token = LAST_INSERT_ID(token + 1),
  memo = ?, depth = 1, lease_ms = ?, data = ?, update_time = UTC_TIMESTAMP(6)
WHERE key_id = ? AND depth = 0

-- name: takeByToken
-- take, matched also by the token this Locker left in the row when it
-- released it: the new token is that plus one, known without
-- LAST_INSERT_ID, which a statement that fires a trigger reports as 0
-- (tokenread.go).
UPDATE {t} SET
  acquired_time = UTC_TIMESTAMP(6), token = token + 1,
  memo = ?, depth = 1, lease_ms = ?, data = ?, update_time = UTC_TIMESTAMP(6)
WHERE key_id = ? AND depth = 0 AND token = ?

-- name: release
-- A release keeps the row's memo (depth 0 says the row is free): a memo
-- cleared and set again changes the row's length at every cycle, which
-- InnoDB cannot update in place; under 8 goroutines that cost as much
-- server CPU as the rest of the release.
UPDATE {t} SET
  lease_ms = IF(depth = 1, 0, lease_ms),
  update_time = IF(depth = 1, UTC_TIMESTAMP(6), update_time),
  depth = depth - 1
WHERE key_id = ? AND memo = ? AND token = ? AND depth > 0 AND NOT ({expired})

-- name: releaseLast
-- releaseLastSQL is the release of the last level, the common case,
-- with constant assignments; releaseSQL handles any depth.
UPDATE {t} SET lease_ms = 0, update_time = UTC_TIMESTAMP(6), depth = 0
WHERE key_id = ? AND memo = ? AND token = ? AND depth = 1 AND NOT ({expired})

-- name: held
SELECT token FROM {t} WHERE key_id = ? AND memo <> ? AND depth > 0 AND NOT ({expired})

-- name: heldKeys
SELECT key_id FROM {t} WHERE key_id IN ({keys}) AND memo <> ? AND depth > 0 AND NOT ({expired})

-- name: handoff
-- The handover reports its token through LAST_INSERT_ID(expr), as the
-- acquire does; the WHERE clause is evaluated before any assignment.
UPDATE {t} SET
  token = LAST_INSERT_ID(token + 1), memo = ?, depth = 1, lease_ms = ?, data = ?,
  update_time = UTC_TIMESTAMP(6), acquired_time = UTC_TIMESTAMP(6)
WHERE key_id = ? AND memo = ? AND token = ? AND depth = 1 AND NOT ({expired})

-- name: renewLockKeys
-- Renewal locks the rows it renews with SKIP LOCKED (MySQL 8.0.1+,
-- MariaDB 10.6+) in a short READ COMMITTED transaction, so a row that
-- another transaction holds (a Lock.Check share lock) is skipped, not
-- waited for. FORCE INDEX: with thousands of keys the optimizer may
-- prefer a scan of the whole primary key, which would lock (next-key)
-- every row and gap of the table, other nodes' live locks included. The
-- keys alone: the caller compares the tokens. A row IN list of n pairs is
-- evaluated against each of n rows (MariaDB, and TiDB: 2,000 locks took
-- 0.47 s against 0.11 s for 1,000).
SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND depth > 0 AND NOT ({expired})
FOR UPDATE {skipLocked}

-- name: renewCheckKeys
SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND depth > 0 AND NOT ({expired})

-- name: renew
-- {lease} is empty for the heartbeat; Lock.Extend's renewal (renewLease)
-- also lengthens the lease to at least the first argument's ms, never
-- shortening it.
UPDATE {t} FORCE INDEX (PRIMARY) SET update_time = UTC_TIMESTAMP(6){lease} WHERE key_id IN ({keys})

-- name: renewCheck
SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, token) IN ({refs}) AND depth > 0 AND NOT ({expired})

-- name: reapFence
SELECT floor_token FROM {fence} WHERE id = 1 FOR UPDATE

-- name: reapScan
-- The candidates from a key on (a batch reads on past the rows it finds
-- locked), in key order: the primary key's.
SELECT key_id FROM {t} WHERE key_id >= ? AND (depth = 0 OR {expired}) ORDER BY key_id LIMIT ?

-- name: reapLock
SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY) WHERE key_id IN ({keys}) AND (depth = 0 OR {expired}) FOR UPDATE {skipLocked}

-- name: reapRaise
-- The reaper raises the fence to the highest token it deletes itself, so
-- that no trigger is needed (TiDB has none); on MySQL and MariaDB the
-- trigger does the same for rows deleted by hand.
UPDATE {fence} SET floor_token = GREATEST(floor_token, ?) WHERE id = 1

-- name: reapDel
-- The keys ({keys}: SELECT ? AS key_id UNION ALL ...) are joined to the
-- table, which is read by primary key only: with many keys in the list
-- (200 and more, or most of a small table) a DELETE ... WHERE key_id IN
-- scans the table, FORCE INDEX or not, and a scan waits on every row
-- another transaction holds locked (a LockTx, a renewal), not only on
-- those it deletes (this batch locked those already).
DELETE l FROM ({keys}) AS k STRAIGHT_JOIN {t} AS l ON l.key_id = k.key_id

-- name: cycleMany
-- cycleMany runs many calls, takes in place of released keys and
-- releases of acquisitions held at depth 1 in any mix, as one statement
-- and so one commit: under load a Locker's goroutines that take and those
-- that release share it, as the raw cycle's 8 connections share InnoDB's
-- group commit. A take's key is matched at depth 0 and the token this
-- Locker left in the row when it released it, so its new token is known
-- without LAST_INSERT_ID (which holds one value); a release's at depth 1,
-- its memo and token, lease live. Every assignment reads the old depth,
-- which is assigned last, so left-to-right and simultaneous assignment
-- (MariaDB's SIMULTANEOUS_ASSIGNMENT) agree.
UPDATE {t} FORCE INDEX (PRIMARY) SET
  acquired_time = IF(depth = 0, UTC_TIMESTAMP(6), acquired_time),
  data = IF(depth = 0, NULL, data),
  token = IF(depth = 0, token + 1, token),
  memo = IF(depth = 0, CASE key_id {whens} END, memo),
  lease_ms = IF(depth = 0, ?, 0),
  update_time = UTC_TIMESTAMP(6),
  depth = 1 - depth
WHERE key_id IN ({keys}) AND (key_id, token, depth, IF(depth = 0, '', memo)) IN ({refs})
  AND (depth = 0 OR NOT ({expired}))

-- name: confirmMany
-- confirmMany finds which calls of a cycleMany that changed fewer rows
-- than it had calls were done: a taken row carries the take's memo at
-- the new token (a memo without Owner is fresh, so only that call set
-- it), a released one the release's memo and token at depth 0.
SELECT key_id FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, memo, token, depth > 0) IN ({refs})

-- name: tx.probe
SELECT depth > 0 AND NOT ({expired}) FROM {t} WHERE key_id = ?

-- name: tx.create
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
SELECT ?, '', 0, {floor}, 0, UTC_TIMESTAMP(6)
FROM {fence} AS f WHERE f.id = 1 {share}
ON DUPLICATE KEY UPDATE key_id = key_id

-- name: tx.rowNowait
SELECT key_id FROM {t} WHERE key_id = ? FOR UPDATE NOWAIT

-- name: tx.take
UPDATE {t} SET
  token = LAST_INSERT_ID(token + 1), memo = '', lease_ms = 0, update_time = UTC_TIMESTAMP(6), depth = 0
WHERE key_id = ? AND (depth = 0 OR {expired})

-- name: tx.check
SELECT 1 FROM {t}
WHERE key_id = ? AND memo = ? AND token = ? AND depth > 0 AND NOT ({expired})
{checkLock}

-- name: queue.enqueue
INSERT INTO {q} (key_id, memo, lease_ms, update_time) VALUES (?, ?, ?, UTC_TIMESTAMP(6))

-- name: queue.state
-- The queue as a waiting call sees it (QueueSQL.StateRows), in one
-- consistent read of three index lookups: the live lease, the call's own
-- ticket, and the oldest live tickets. It costs MariaDB about half the
-- CPU of the same answers as one row of five subqueries and a join.
(SELECT 0, token, memo = ?, TIMESTAMPDIFF(MICROSECOND, update_time, UTC_TIMESTAMP(6))
  FROM {t} WHERE key_id = ? AND depth > 0 AND NOT ({expired}))
UNION ALL (SELECT 1, ticket, 0, 0 FROM {q} WHERE ticket = ? AND {live})
UNION ALL (SELECT 2, ticket, 0, 0 FROM {q} WHERE key_id = ? AND {live} ORDER BY ticket LIMIT {tickets})

-- name: queue.pass
-- The release of the last level that gives the key to ticket n, read
-- before by a consistent read, if that ticket is live and grantable (its
-- memo is "g:" and the waiter's owner memo): the row moves to the
-- waiter's memo with a token drawn on the locked row (as a handover's,
-- reported through LAST_INSERT_ID) and the ticket's lease, and the ticket
-- is expired (a multi-table UPDATE cannot delete; its waiter deletes it),
-- in one durable commit. Both rows are found by primary key, so the
-- statement locks only them: a read of the ticket table's index in an
-- UPDATE of the lock table locks index entries, and deadlocked with ticket
-- deletes. It changes nothing when it grants nothing. A waiter that
-- deletes its ticket to leave either finds it granted (the ticket row is
-- locked here) or deletes it before any grant. Assignments to one table
-- never read the columns assigned in the other, whose order a
-- multi-table UPDATE does not fix.
UPDATE {t} AS l JOIN {q} AS n ON n.ticket = ? AND n.key_id = l.key_id AND n.memo LIKE 'g:%'
  AND n.update_time + INTERVAL n.lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)
SET l.token = LAST_INSERT_ID(l.token + 1), l.memo = SUBSTRING(n.memo, 3), l.depth = 1,
  l.lease_ms = n.lease_ms, l.data = NULL, l.update_time = UTC_TIMESTAMP(6),
  l.acquired_time = UTC_TIMESTAMP(6), n.update_time = '1970-01-01'
WHERE l.key_id = ? AND l.memo = ? AND l.token = ? AND l.depth = 1
  AND l.update_time + INTERVAL l.lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)

-- name: queue.next
-- The oldest live ticket for a key, for a release that has not read it.
SELECT ticket FROM {q} WHERE key_id = ? AND {live} ORDER BY ticket LIMIT 1

-- name: queue.renew
UPDATE {q} SET update_time = UTC_TIMESTAMP(6) WHERE ticket IN ({list}) AND {live}

-- name: queue.dequeue
DELETE FROM {q} WHERE ticket = ?

-- name: queue.drop
-- The tickets listed, which grants left expired (their grantees hold the
-- key): by primary key, as the single delete.
DELETE FROM {q} WHERE ticket IN ({list})

-- name: queue.forget
DELETE FROM {q} WHERE key_id = ? AND memo = ?

-- name: queue.reap
DELETE FROM {q} WHERE NOT ({live}) LIMIT {limit}

-- The token of (key, memo)'s live row, if any.
-- name: owned
SELECT token FROM {t} WHERE key_id = ? AND memo = ? AND depth > 0 AND NOT ({expired})

-- name: get
SELECT {cols} FROM {t} WHERE key_id = ? AND depth > 0 AND NOT ({expired})

-- name: setData
UPDATE {t} SET data = ?
WHERE key_id = ? AND memo = ? AND token = ? AND depth > 0 AND NOT ({expired})

-- name: live
SELECT 1 FROM {t} WHERE key_id = ? AND memo = ? AND token = ? AND depth > 0 AND NOT ({expired})

-- name: takeAny
-- A semaphore's permit: the first free row among {keys}, in key order (a
-- deterministic order keeps the statement safe for statement-based
-- replication); a taker that waited on a row taken meanwhile moves on.
UPDATE {t} SET
  acquired_time = UTC_TIMESTAMP(6), token = LAST_INSERT_ID(token + 1),
  memo = ?, depth = 1, lease_ms = ?, data = NULL, update_time = UTC_TIMESTAMP(6)
WHERE key_id IN ({keys}) AND (depth = 0 OR {expired})
ORDER BY key_id LIMIT 1

-- name: takeAnyOne
-- takeAny reporting which row it took with the token, in one value:
-- LAST_INSERT_ID(token * 1024 + the row's place among {keys}, counted
-- from 1; a semaphore has at most 1000), set by an assignment after
-- token's (MySQL and MariaDB assign from left to right, each seeing the
-- values assigned before it). A token too large for that reports minus
-- the place, and is then read. Not on TiDB, whose tokens start above its
-- timestamp oracle.
UPDATE {t} SET
  acquired_time = UTC_TIMESTAMP(6), token = token + 1,
  depth = IF(LAST_INSERT_ID(IF(token < 9007199254740992, token * 1024 + FIELD(key_id, {keys}), -FIELD(key_id, {keys}))), 1, 1),
  memo = ?, lease_ms = ?, data = NULL, update_time = UTC_TIMESTAMP(6)
WHERE key_id IN ({keys}) AND (depth = 0 OR {expired})
ORDER BY key_id LIMIT 1

-- name: takenAny
SELECT key_id FROM {t} WHERE key_id IN ({keys}) AND memo = ? AND token = ?

-- Reads of the token a statement took when a trigger (the history's)
-- made its OK packet report LAST_INSERT_ID 0 (tokenread.go).
-- name: read.takenBy
SELECT key_id, token FROM {t} WHERE key_id IN ({keys}) AND memo = ? AND depth > 0

-- name: read.txToken
SELECT token FROM {t} WHERE key_id = ?

-- name: read.granted
SELECT l.token FROM {t} AS l JOIN {q} AS n ON n.ticket = ? AND l.memo = SUBSTRING(n.memo, 3)
WHERE l.key_id = ? AND l.depth > 0

-- name: existing
SELECT key_id FROM {t} WHERE key_id IN ({keys})

-- name: ensure
INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
SELECT ?, '', 0, {floor} + 1, 0, UTC_TIMESTAMP(6)
FROM {fence} AS f WHERE f.id = 1 {share}
ON DUPLICATE KEY UPDATE key_id = key_id

-- Waiter records (WaiterSQL): {w} the waiter table, {wlive} a live record w.
-- name: waiters.insert
-- {rows}: one row per record (WaiterSQL.Insert).
INSERT INTO {w} (waiter, key_id, memo, holds, ticket, since_time, lease_ms, update_time, data) VALUES {rows}

-- name: waiters.renew
UPDATE {w} w SET w.update_time = UTC_TIMESTAMP(6) WHERE w.waiter IN ({list}) AND {wlive}

-- name: waiters.ticket
UPDATE {w} SET ticket = ? WHERE waiter = ?

-- name: waiters.delete
DELETE FROM {w} WHERE waiter IN ({list})

-- name: waiters.list
SELECT w.waiter, w.key_id, w.memo, w.holds, w.ticket,
  CASE WHEN w.ticket > 0 THEN (SELECT COUNT(*) FROM {q} q WHERE q.key_id = w.key_id AND q.ticket <= w.ticket
    AND q.update_time + INTERVAL q.lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)) ELSE 0 END,
  TIMESTAMPDIFF(MICROSECOND, w.since_time, UTC_TIMESTAMP(6)),
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), w.update_time + INTERVAL w.lease_ms * 1000 MICROSECOND),
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), w.data
FROM {w} w WHERE (? = '' OR w.key_id = ?) AND {wlive}
ORDER BY w.key_id, w.since_time, w.waiter

-- name: waiters.reap
DELETE FROM {w} WHERE NOT (update_time + INTERVAL lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)) LIMIT {limit}

-- History (HistorySQL): {h} the history table.
-- name: history.list
SELECT h.id, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', h.event_time), h.key_id, h.event, h.memo, h.token, h.depth, h.held_ms, h.detail
FROM {h} h WHERE (? = '' OR h.key_id = ?) AND h.event_time >= TIMESTAMP('1970-01-01 00:00:00') + INTERVAL ? MICROSECOND
ORDER BY h.id LIMIT ?

-- name: history.reap
DELETE FROM {h} WHERE event_time < UTC_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND LIMIT {limit}

-- name: history.on
-- The history's update trigger on the lock table, or on TiDB (whose
-- information_schema.TRIGGERS is always empty) the lock table's comment
-- that says the processes write it (schema/history/tidb.sql, journal.go).
SELECT (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? AND TRIGGER_NAME = ?)
     + (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND TABLE_COMMENT = 'dblock: history written by its processes')

-- name: history.label
-- ForceUnlock names itself to the history's trigger, which writes the
-- release of a live lease in this session as force-unlocked by it, in a
-- session variable that history.unlabel clears after the release (so the
-- roles that take locks need no grant on the history).
SET @dblock_force = ?

-- name: history.unlabel
SET @dblock_force = NULL

-- TiDB's history, which the processes write (journal.go): the mark on the
-- lock table's comment that turns it on (schema/history/tidb.sql), the
-- rows of a change's keys locked and read before it, read again after it
-- with the database's time and ForceUnlock's label (journal.now alone when
-- every row was deleted), and the insert of its events, whose rows of
-- values journal.go appends.
-- name: journal.on
SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND TABLE_COMMENT = 'dblock: history written by its processes'

-- name: journal.before
SELECT key_id, token, depth, memo,
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', acquired_time),
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', update_time + INTERVAL lease_ms * 1000 MICROSECOND)
FROM {t} WHERE key_id IN ({keys}) FOR UPDATE

-- name: journal.after
SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), @dblock_force,
  key_id, token, depth, memo,
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', acquired_time),
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', update_time + INTERVAL lease_ms * 1000 MICROSECOND)
FROM {t} WHERE key_id IN ({keys}) FOR UPDATE

-- name: journal.now
SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), @dblock_force

-- name: journal.insert
INSERT INTO {h} (id, event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES
