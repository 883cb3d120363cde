-- Lesson 5's Solid-Cache-shaped store on InnoDB, as Solid Cache's own
-- migration makes solid_cache_entries on MySQL: the key as binary, the
-- value a blob with its expiry inside, key_hash (the first 8 bytes of
-- SHA-256 of the key) the one unique index. Every write is an upsert on
-- it (INSERT ... ON DUPLICATE KEY UPDATE).
CREATE TABLE cache_entries (
    id         BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    `key`      VARBINARY(1024) NOT NULL,
    value      LONGBLOB        NOT NULL,
    key_hash   BIGINT          NOT NULL,
    byte_size  INT             NOT NULL,
    created_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY cache_entries_key_hash (key_hash)
) ENGINE = InnoDB;
