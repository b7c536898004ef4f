ALTER TABLE lock_table DROP COLUMN data;
