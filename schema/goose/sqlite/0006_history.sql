-- +goose Up
CREATE TABLE IF NOT EXISTS lock_table_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_time  INTEGER NOT NULL,
    key_id      TEXT    NOT NULL,
    event       TEXT    NOT NULL,
    memo        TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    depth       INTEGER NOT NULL,
    held_ms     INTEGER NULL,
    detail      TEXT    NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS lock_table_history_key ON lock_table_history (key_id, id);
CREATE INDEX IF NOT EXISTS lock_table_history_time ON lock_table_history (event_time);
-- +goose Down
DROP TRIGGER IF EXISTS lock_table_history_ai;
DROP TRIGGER IF EXISTS lock_table_history_au;
DROP TRIGGER IF EXISTS lock_table_history_ad;
DROP TABLE IF EXISTS lock_table_history;
