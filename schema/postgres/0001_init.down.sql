DROP TABLE IF EXISTS lock_table;
DROP SEQUENCE IF EXISTS lock_table_token_seq;
