-- Turns the history off for lock_table (the rows written stay).
DROP TRIGGER IF EXISTS lock_table_history_ai;
DROP TRIGGER IF EXISTS lock_table_history_au;
DROP TRIGGER IF EXISTS lock_table_history_ad;
