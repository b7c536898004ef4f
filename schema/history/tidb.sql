-- Turns the history on for lock_table on TiDB, which runs no triggers:
-- while the lock table's comment says so, every dblock process (this
-- version or later) writes the events of each change it makes to
-- lock_table into lock_table_history itself, in the transaction of the
-- change, numbered by this sequence (NOCACHE: in the order they are
-- written, whichever tidb-server writes them). A running process notices
-- within 5 seconds; an older version writes none. The accounts that take
-- locks need INSERT on lock_table_history and on the sequence
-- (docs/privileges.md): without them their changes fail, saying so.
CREATE SEQUENCE IF NOT EXISTS lock_table_history_seq NOCACHE;
ALTER TABLE lock_table COMMENT = 'dblock: history written by its processes';
