SET @dblock_ddl = (SELECT IF(COUNT(*) = 1, 'ALTER TABLE lock_table DROP COLUMN acquired_time', 'DO 0') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'lock_table' AND column_name = 'acquired_time');
PREPARE dblock_ddl FROM @dblock_ddl;
EXECUTE dblock_ddl;
DEALLOCATE PREPARE dblock_ddl;
