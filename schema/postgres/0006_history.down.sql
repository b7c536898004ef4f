DROP TRIGGER IF EXISTS lock_table_history_tr ON lock_table;
DROP FUNCTION IF EXISTS lock_table_history_fn();
DROP TABLE IF EXISTS lock_table_history;
