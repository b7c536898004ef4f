CREATE TABLE IF NOT EXISTS lock_table (
    key_id      TEXT    NOT NULL PRIMARY KEY CHECK (length(CAST(key_id AS BLOB)) BETWEEN 1 AND 255),
    memo        TEXT    NOT NULL CHECK (length(CAST(memo AS BLOB)) <= 255),
    depth       INTEGER NOT NULL CHECK (depth >= 0),
    token       INTEGER NOT NULL,
    lease_ms    INTEGER NOT NULL CHECK (lease_ms >= 0),
    update_time INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lock_table_fence (
    id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    floor_token INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO lock_table_fence (id, floor_token) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS lock_table_fence_bd BEFORE DELETE ON lock_table FOR EACH ROW BEGIN UPDATE lock_table_fence SET floor_token = max(floor_token, OLD.token) WHERE id = 1; END;
