-- +goose Up
ALTER TABLE lock_table ADD COLUMN IF NOT EXISTS data BYTEA NULL;
-- +goose Down
ALTER TABLE lock_table DROP COLUMN IF EXISTS data;
