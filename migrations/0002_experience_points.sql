-- The XP ledger: the work the guard is meant to do exactly once.
-- `idempotency_key` is only filled by the single-statement strategy
-- (insert-unique), whose unique index is the whole guard.
CREATE TABLE experience_points (
    id              bigserial   PRIMARY KEY,
    user_id         bigint      NOT NULL,
    amount          integer     NOT NULL,
    idempotency_key text,
    -- idem's bookkeeping: which simulated request made the row.
    worker          integer,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX experience_points_idempotency_key
    ON experience_points (idempotency_key);
