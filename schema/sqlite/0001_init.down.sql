DROP TRIGGER IF EXISTS lock_table_fence_bd;
DROP TABLE IF EXISTS lock_table_fence;
DROP TABLE IF EXISTS lock_table;
