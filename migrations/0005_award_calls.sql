-- The award service's own record of its calls, for lesson 9. `idem serve`
-- writes a row each time a request's work calls the service, on a
-- connection of the service's own, outside the request's transaction: no
-- rollback takes it back. So it counts the times the work ran, where
-- experience_points counts the times a request committed.
CREATE TABLE award_calls (
    id              bigserial   PRIMARY KEY,
    idempotency_key text        NOT NULL,
    worker          integer     NOT NULL,
    called_at       timestamptz NOT NULL DEFAULT now()
);
