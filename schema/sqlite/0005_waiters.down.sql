DROP TABLE IF EXISTS lock_table_waiters;
