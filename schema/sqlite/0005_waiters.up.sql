CREATE TABLE IF NOT EXISTS lock_table_waiters (
    waiter      INTEGER PRIMARY KEY,
    key_id      TEXT    NOT NULL CHECK (length(CAST(key_id AS BLOB)) BETWEEN 1 AND 255),
    memo        TEXT    NOT NULL CHECK (length(CAST(memo AS BLOB)) <= 255),
    holds       TEXT    NOT NULL CHECK (length(CAST(holds AS BLOB)) <= 8192),
    ticket      INTEGER NOT NULL,
    since_time  INTEGER NOT NULL,
    lease_ms    INTEGER NOT NULL CHECK (lease_ms > 0),
    update_time INTEGER NOT NULL,
    data        BLOB    NULL
) STRICT;
CREATE INDEX IF NOT EXISTS lock_table_waiters_key ON lock_table_waiters (key_id, waiter);
