CREATE TABLE IF NOT EXISTS lock_table_waiters (
    waiter      BIGINT          NOT NULL,
    key_id      VARBINARY(255)  NOT NULL,
    memo        VARBINARY(255)  NOT NULL,
    holds       VARBINARY(8192) NOT NULL,
    ticket      BIGINT          NOT NULL,
    since_time  DATETIME(6)     NOT NULL,
    lease_ms    BIGINT          NOT NULL,
    update_time DATETIME(6)     NOT NULL,
    data        MEDIUMBLOB      NULL,
    PRIMARY KEY (waiter),
    KEY lock_table_waiters_key (key_id, waiter)
) ENGINE = InnoDB;
