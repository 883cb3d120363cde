-- The key store on InnoDB, as migrations/0001 is on PostgreSQL: one row per
-- idempotency key, and the unique index that lets the database decide who
-- owns a key. JSON is MariaDB's alias for LONGTEXT with a validity check.
CREATE TABLE idempotency_keys (
    id                  BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    `key`               VARCHAR(255) NOT NULL,
    operation           VARCHAR(64)  NOT NULL,
    status              VARCHAR(16)  NOT NULL DEFAULT 'pending'
                                     CHECK (status IN ('pending', 'completed')),
    request_fingerprint VARCHAR(128),
    response_code       INT,
    response_body       JSON,
    -- idem's bookkeeping: which simulated request wrote the row.
    worker              INT,
    locked_at           DATETIME(6),
    created_at          DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    completed_at        DATETIME(6),
    UNIQUE KEY idempotency_keys_key (`key`)
) ENGINE = InnoDB;
