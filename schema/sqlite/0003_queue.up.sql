CREATE TABLE IF NOT EXISTS lock_table_queue (
    ticket      INTEGER PRIMARY KEY AUTOINCREMENT,
    key_id      TEXT    NOT NULL CHECK (length(CAST(key_id AS BLOB)) BETWEEN 1 AND 255),
    memo        TEXT    NOT NULL CHECK (length(CAST(memo AS BLOB)) <= 255),
    lease_ms    INTEGER NOT NULL CHECK (lease_ms > 0),
    update_time INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS lock_table_queue_key ON lock_table_queue (key_id, ticket);
