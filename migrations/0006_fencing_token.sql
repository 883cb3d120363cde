-- The fencing token of lesson 5's Redis claims (`--redis-fence`): the
-- highest token the store of record has seen for a key. A request whose
-- Redis claim handed it an older token may no longer write the key.
ALTER TABLE idempotency_keys ADD COLUMN fencing_token bigint;
