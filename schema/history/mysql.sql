-- Turns the history on for lock_table: every acquisition, re-entry,
-- release, loss and deletion of a lease is written to lock_table_history
-- by triggers, in the transaction of the statement that made it. The
-- triggers run with their definer's rights, so the accounts that take
-- locks need no grant on the history and cannot change it. ForceUnlock
-- names itself in the session variable @dblock_force around its release,
-- which it then clears. Each trigger
-- is on one line (its body's semicolons end no line); IF NOT EXISTS keeps
-- a second run from dropping a trigger while locks are taken.
-- A statement that fires a trigger reports 0 as its LAST_INSERT_ID in the
-- OK packet, where dblock's lock statements report their token: dblock
-- (from the version that turns the history on here) then reads the token
-- instead, and a process running an older version must not use the table
-- while the history is on.
ALTER TABLE lock_table_history MODIFY id BIGINT NOT NULL AUTO_INCREMENT;
CREATE TRIGGER IF NOT EXISTS lock_table_history_ai AFTER INSERT ON lock_table FOR EACH ROW BEGIN IF NEW.depth > 0 THEN INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (UTC_TIMESTAMP(6), NEW.key_id, 'acquired', NEW.memo, NEW.token, NEW.depth, NULL, ''); END IF; END;
CREATE TRIGGER IF NOT EXISTS lock_table_history_au AFTER UPDATE ON lock_table FOR EACH ROW BEGIN DECLARE ts DATETIME(6) DEFAULT UTC_TIMESTAMP(6); DECLARE old_end DATETIME(6) DEFAULT OLD.update_time + INTERVAL OLD.lease_ms * 1000 MICROSECOND; IF OLD.depth > 0 AND (NEW.token <> OLD.token OR NEW.depth = 0) THEN INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, OLD.key_id, CASE WHEN old_end <= ts THEN 'lost' WHEN NEW.depth = 0 AND @dblock_force IS NOT NULL THEN 'force-unlocked' ELSE 'released' END, OLD.memo, OLD.token, 0, TIMESTAMPDIFF(MICROSECOND, OLD.acquired_time, LEAST(old_end, ts)) DIV 1000, CASE WHEN old_end > ts AND NEW.depth > 0 THEN 'handed over' WHEN old_end > ts THEN COALESCE(@dblock_force, '') WHEN NEW.depth > 0 THEN 'lease ran out; taken by the next owner' ELSE 'lease ran out; taken by a transaction' END); ELSEIF OLD.depth > 0 AND NEW.depth > 0 AND NEW.depth <> OLD.depth THEN INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, NEW.key_id, IF(NEW.depth > OLD.depth, 'reentered', 'released'), NEW.memo, NEW.token, NEW.depth, NULL, IF(NEW.depth > OLD.depth, '', 'one level')); END IF; IF NEW.depth > 0 AND (OLD.depth = 0 OR NEW.token <> OLD.token) THEN INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, NEW.key_id, 'acquired', NEW.memo, NEW.token, NEW.depth, NULL, IF(OLD.depth > 0 AND old_end > ts, 'handed over', '')); END IF; END;
CREATE TRIGGER IF NOT EXISTS lock_table_history_ad AFTER DELETE ON lock_table FOR EACH ROW BEGIN DECLARE ts DATETIME(6) DEFAULT UTC_TIMESTAMP(6); DECLARE old_end DATETIME(6) DEFAULT OLD.update_time + INTERVAL OLD.lease_ms * 1000 MICROSECOND; IF OLD.depth > 0 THEN INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, OLD.key_id, IF(old_end > ts, 'deleted', 'lost'), OLD.memo, OLD.token, 0, TIMESTAMPDIFF(MICROSECOND, OLD.acquired_time, LEAST(old_end, ts)) DIV 1000, IF(old_end > ts, 'deleted by hand', 'lease ran out; reaped')); END IF; END;
