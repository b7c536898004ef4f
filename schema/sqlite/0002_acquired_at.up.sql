ALTER TABLE lock_table ADD COLUMN acquired_time INTEGER;
