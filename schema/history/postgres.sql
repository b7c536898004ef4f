-- Turns the history on for lock_table: every acquisition, re-entry,
-- release, loss and deletion of a lease is written to lock_table_history
-- by a trigger, in the transaction of the statement that made it.
-- The function runs with the rights of the role that created it
-- (SECURITY DEFINER, with that role's search_path), so the roles that take
-- locks need no grant on the history and cannot change it. ForceUnlock
-- names itself through the setting dblock.force, local to its
-- transaction. Statements inside the function start with their
-- semicolon, so that no line inside it ends with one (Migrate splits
-- files there).
CREATE OR REPLACE FUNCTION lock_table_history_fn() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
DECLARE
  ts timestamptz := statement_timestamp()
; forced text := COALESCE(current_setting('dblock.force', true), '')
; old_live boolean := TG_OP <> 'INSERT' AND OLD.depth > 0 AND OLD.update_time + OLD.lease_ms * interval '1 millisecond' > ts
; BEGIN
  IF TG_OP <> 'INSERT' AND OLD.depth > 0 AND (TG_OP = 'DELETE' OR NEW.token <> OLD.token OR NEW.depth = 0) THEN
    INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, OLD.key_id,
      CASE WHEN NOT old_live THEN 'lost' WHEN TG_OP = 'DELETE' THEN 'deleted' WHEN NEW.depth = 0 AND forced <> '' THEN 'force-unlocked' ELSE 'released' END,
      OLD.memo, OLD.token, 0,
      (EXTRACT(EPOCH FROM (CASE WHEN old_live THEN ts ELSE OLD.update_time + OLD.lease_ms * interval '1 millisecond' END) - OLD.acquired_time) * 1000)::bigint,
      CASE WHEN TG_OP = 'DELETE' THEN CASE WHEN old_live THEN 'deleted by hand' ELSE 'lease ran out; reaped' END
        WHEN old_live AND NEW.depth > 0 THEN 'handed over' WHEN old_live THEN forced
        WHEN NEW.depth > 0 THEN 'lease ran out; taken by the next owner' ELSE 'lease ran out; taken by a transaction' END)
  ; ELSIF TG_OP = 'UPDATE' AND OLD.depth > 0 AND NEW.depth > 0 AND NEW.token = OLD.token AND NEW.depth <> OLD.depth THEN
    INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, NEW.key_id,
      CASE WHEN NEW.depth > OLD.depth THEN 'reentered' ELSE 'released' END, NEW.memo, NEW.token, NEW.depth, NULL,
      CASE WHEN NEW.depth > OLD.depth THEN '' ELSE 'one level' END)
  ; END IF
  ; IF TG_OP <> 'DELETE' AND NEW.depth > 0 AND (TG_OP = 'INSERT' OR OLD.depth = 0 OR NEW.token <> OLD.token) THEN
    INSERT INTO lock_table_history (event_time, key_id, event, memo, token, depth, held_ms, detail) VALUES (ts, NEW.key_id,
      'acquired', NEW.memo, NEW.token, NEW.depth, NULL, CASE WHEN old_live THEN 'handed over' ELSE '' END)
  ; END IF
  ; RETURN NULL
; END
$fn$;
DROP TRIGGER IF EXISTS lock_table_history_tr ON lock_table;
CREATE TRIGGER lock_table_history_tr AFTER INSERT OR DELETE OR UPDATE OF depth, token ON lock_table FOR EACH ROW EXECUTE FUNCTION lock_table_history_fn();
