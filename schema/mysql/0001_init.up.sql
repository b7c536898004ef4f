CREATE TABLE IF NOT EXISTS lock_table (
    key_id      VARBINARY(255) NOT NULL,
    memo        VARBINARY(255) NOT NULL,
    depth       INT            NOT NULL,
    token       BIGINT         NOT NULL,
    lease_ms    BIGINT         NOT NULL,
    update_time DATETIME(6)    NOT NULL,
    PRIMARY KEY (key_id)
) ENGINE = InnoDB;
CREATE TABLE IF NOT EXISTS lock_table_fence (
    id          TINYINT NOT NULL,
    floor_token BIGINT  NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB;
INSERT IGNORE INTO lock_table_fence (id, floor_token) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS lock_table_fence_bd BEFORE DELETE ON lock_table FOR EACH ROW UPDATE lock_table_fence SET floor_token = GREATEST(floor_token, OLD.token) WHERE id = 1;
