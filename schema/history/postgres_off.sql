-- Turns the history off for lock_table (the rows written stay).
DROP TRIGGER IF EXISTS lock_table_history_tr ON lock_table;
DROP FUNCTION IF EXISTS lock_table_history_fn();
