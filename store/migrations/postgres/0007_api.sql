-- Operators' runtime overrides of an adapter's `enabled`, made through the HTTP API. `draining`
-- is a disable waiting for the adapter's active sessions to end: no new session starts, and the
-- row turns `disabled` when the last one ends. `status` shows drift while the spec disagrees.
CREATE TABLE agent_overrides (
    adapter     TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    changed_at  TEXT NOT NULL,
    message     TEXT NOT NULL
);

-- Responses to mutating API requests by their Idempotency-Key, kept 24 hours: a retry with the
-- same key and the same request replays the stored response without acting again. `pending`
-- marks a request still being served (a concurrent retry is refused, not run twice).
CREATE TABLE idempotency_keys (
    key           TEXT PRIMARY KEY,
    request_hash  TEXT NOT NULL,
    state         TEXT NOT NULL,
    status        BIGINT,
    content_type  TEXT,
    body          BYTEA,
    created_at    TEXT NOT NULL
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- Reconcile requests now reach the daemon through its API at once; the table it polled goes.
DROP TABLE reconcile_requests;
