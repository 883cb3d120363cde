-- The key store the course builds: one row per idempotency key.
-- The unique index on `key` is what lets the database, not the code,
-- decide which request owns a key.
CREATE TABLE idempotency_keys (
    id                  bigserial   PRIMARY KEY,
    key                 text        NOT NULL,
    operation           text        NOT NULL,
    status              text        NOT NULL DEFAULT 'pending'
                                    CHECK (status IN ('pending', 'completed')),
    request_fingerprint text,
    response_code       integer,
    response_body       jsonb,
    -- idem's bookkeeping: which simulated request wrote the row.
    worker              integer,
    locked_at           timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    completed_at        timestamptz
);

CREATE UNIQUE INDEX idempotency_keys_key ON idempotency_keys (key);
