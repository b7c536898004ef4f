CREATE UNLOGGED TABLE IF NOT EXISTS lock_table_waiters (
    waiter      BIGINT      NOT NULL PRIMARY KEY,
    key_id      TEXT        NOT NULL CHECK (octet_length(key_id) BETWEEN 1 AND 255),
    memo        TEXT        NOT NULL CHECK (octet_length(memo) <= 255),
    holds       TEXT        NOT NULL CHECK (octet_length(holds) <= 8192),
    ticket      BIGINT      NOT NULL,
    since_time  TIMESTAMPTZ NOT NULL,
    lease_ms    BIGINT      NOT NULL CHECK (lease_ms > 0),
    update_time TIMESTAMPTZ NOT NULL DEFAULT statement_timestamp(),
    data        BYTEA       NULL
);
CREATE INDEX IF NOT EXISTS lock_table_waiters_key ON lock_table_waiters (key_id, waiter);
