-- +goose Up
CREATE TABLE IF NOT EXISTS lock_table (
    key_id      TEXT        NOT NULL PRIMARY KEY CHECK (octet_length(key_id) BETWEEN 1 AND 255),
    memo        TEXT        NOT NULL CHECK (octet_length(memo) <= 255),
    depth       INTEGER     NOT NULL CHECK (depth >= 0),
    token       BIGINT      NOT NULL,
    lease_ms    BIGINT      NOT NULL CHECK (lease_ms >= 0),
    update_time TIMESTAMPTZ NOT NULL DEFAULT statement_timestamp()
);
CREATE SEQUENCE IF NOT EXISTS lock_table_token_seq AS BIGINT;
-- +goose Down
DROP TABLE IF EXISTS lock_table;
DROP SEQUENCE IF EXISTS lock_table_token_seq;
