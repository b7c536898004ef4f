-- +goose Up
CREATE TABLE IF NOT EXISTS lock_table_queue (
    ticket      BIGINT         NOT NULL AUTO_INCREMENT,
    key_id      VARBINARY(255) NOT NULL,
    memo        VARBINARY(255) NOT NULL,
    lease_ms    BIGINT         NOT NULL,
    update_time DATETIME(6)    NOT NULL,
    PRIMARY KEY (ticket),
    KEY lock_table_queue_key (key_id, ticket)
) ENGINE = InnoDB;
-- +goose Down
DROP TABLE IF EXISTS lock_table_queue;
