-- A store shaped like Rails' Solid Cache (solid_cache_entries), for lesson 5.
-- No expiry column: the expiry lives inside the serialised value and is
-- checked on read. key_hash is the first 8 bytes of SHA-256 of the key.
CREATE TABLE cache_entries (
    id         bigserial   PRIMARY KEY,
    key        bytea       NOT NULL,
    value      bytea       NOT NULL,
    key_hash   bigint      NOT NULL,
    byte_size  integer     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX cache_entries_key_hash ON cache_entries (key_hash);
