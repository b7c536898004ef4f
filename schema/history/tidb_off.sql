-- Turns the history off for lock_table on TiDB (the rows written stay):
-- running processes stop writing it within 5 seconds. The sequence
-- stays, as those processes still draw from it until then; drop it
-- (DROP SEQUENCE lock_table_history_seq) only once none uses the history.
ALTER TABLE lock_table COMMENT = '';
