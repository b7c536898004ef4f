CREATE UNLOGGED TABLE IF NOT EXISTS lock_table_queue (
    ticket      BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key_id      TEXT        NOT NULL CHECK (octet_length(key_id) BETWEEN 1 AND 255),
    memo        TEXT        NOT NULL CHECK (octet_length(memo) <= 255),
    lease_ms    BIGINT      NOT NULL CHECK (lease_ms > 0),
    update_time TIMESTAMPTZ NOT NULL DEFAULT statement_timestamp()
);
CREATE INDEX IF NOT EXISTS lock_table_queue_key ON lock_table_queue (key_id, ticket);
