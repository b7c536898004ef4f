-- +goose Up
ALTER TABLE lock_table ADD COLUMN data BLOB;
-- +goose Down
ALTER TABLE lock_table DROP COLUMN data;
