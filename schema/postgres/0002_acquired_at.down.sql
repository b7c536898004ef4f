ALTER TABLE lock_table DROP COLUMN IF EXISTS acquired_time;
