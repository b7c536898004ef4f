CREATE TABLE IF NOT EXISTS lock_table_history (
    id          BIGINT         NOT NULL,
    event_time  DATETIME(6)    NOT NULL,
    key_id      VARBINARY(255) NOT NULL,
    event       VARCHAR(32)    NOT NULL,
    memo        VARBINARY(255) NOT NULL,
    token       BIGINT         NOT NULL,
    depth       INT            NOT NULL,
    held_ms     BIGINT         NULL,
    detail      VARCHAR(255)   NOT NULL,
    PRIMARY KEY (id),
    KEY lock_table_history_key (key_id, id),
    KEY lock_table_history_time (event_time)
) ENGINE = InnoDB;
