ALTER TABLE lock_table DROP COLUMN acquired_time;
