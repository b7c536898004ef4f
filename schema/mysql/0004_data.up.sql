SET @dblock_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE lock_table ADD COLUMN data MEDIUMBLOB NULL', 'DO 0') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'lock_table' AND column_name = 'data');
PREPARE dblock_ddl FROM @dblock_ddl;
EXECUTE dblock_ddl;
DEALLOCATE PREPARE dblock_ddl;
