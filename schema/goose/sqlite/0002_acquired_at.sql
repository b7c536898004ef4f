-- +goose Up
ALTER TABLE lock_table ADD COLUMN acquired_time INTEGER;
-- +goose Down
ALTER TABLE lock_table DROP COLUMN acquired_time;
