DROP TRIGGER IF EXISTS lock_table_history_ai;
DROP TRIGGER IF EXISTS lock_table_history_au;
DROP TRIGGER IF EXISTS lock_table_history_ad;
DROP TABLE IF EXISTS lock_table_history;
