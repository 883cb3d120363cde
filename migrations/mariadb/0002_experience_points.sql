-- The XP ledger on InnoDB, as migrations/0002 and 0003 are on PostgreSQL.
-- `idempotency_key` is only filled by insert-unique, whose unique index is
-- the whole guard; InnoDB, like PostgreSQL, lets many NULLs share it.
CREATE TABLE experience_points (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id         BIGINT       NOT NULL,
    amount          INT          NOT NULL,
    lesson          INT,
    idempotency_key VARCHAR(255),
    -- idem's bookkeeping: which simulated request made the row.
    worker          INT,
    created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY experience_points_idempotency_key (idempotency_key)
) ENGINE = InnoDB;
