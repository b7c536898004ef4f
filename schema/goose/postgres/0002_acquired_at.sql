-- +goose Up
ALTER TABLE lock_table ADD COLUMN IF NOT EXISTS acquired_time TIMESTAMPTZ NULL;
-- +goose Down
ALTER TABLE lock_table DROP COLUMN IF EXISTS acquired_time;
