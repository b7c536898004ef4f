-- +goose Up
CREATE TABLE IF NOT EXISTS lock_table_history (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_time  TIMESTAMPTZ NOT NULL,
    key_id      TEXT        NOT NULL,
    event       TEXT        NOT NULL,
    memo        TEXT        NOT NULL,
    token       BIGINT      NOT NULL,
    depth       INTEGER     NOT NULL,
    held_ms     BIGINT      NULL,
    detail      TEXT        NOT NULL
);
CREATE INDEX IF NOT EXISTS lock_table_history_key ON lock_table_history (key_id, id);
CREATE INDEX IF NOT EXISTS lock_table_history_time ON lock_table_history USING brin (event_time);
-- +goose Down
DROP TRIGGER IF EXISTS lock_table_history_tr ON lock_table;
DROP FUNCTION IF EXISTS lock_table_history_fn();
DROP TABLE IF EXISTS lock_table_history;
