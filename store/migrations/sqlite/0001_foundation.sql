-- Objects the controller has seen, their generations and tombstones.
-- Kept to portable SQL (TEXT timestamps in RFC 3339, BIGINT counters) so the same
-- statements run on PostgreSQL.
CREATE TABLE objects (
    kind                TEXT    NOT NULL,
    name                TEXT    NOT NULL,
    -- Bumped each time spec_digest changes; starts at 1.
    generation          BIGINT  NOT NULL,
    spec_digest         TEXT    NOT NULL,
    -- Assignments only: the digest of the run fields.
    execution_digest    TEXT,
    -- Bumped each time execution_digest changes.
    execution_generation BIGINT,
    -- The last valid spec, as JSON, so a file that stops parsing keeps its objects.
    spec_json           TEXT    NOT NULL,
    source_file         TEXT    NOT NULL,
    observed_generation BIGINT,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    -- Set when the spec disappears; the cleanup reconcile then forgets the row.
    deleted_at          TEXT,
    PRIMARY KEY (kind, name)
);

CREATE TABLE conditions (
    kind                 TEXT   NOT NULL,
    name                 TEXT   NOT NULL,
    type                 TEXT   NOT NULL,
    status               TEXT   NOT NULL,
    reason               TEXT   NOT NULL,
    message              TEXT   NOT NULL,
    last_transition_time TEXT   NOT NULL,
    observed_generation  BIGINT NOT NULL,
    PRIMARY KEY (kind, name, type)
);

-- One table for events and audited records. Audited rows carry the chain columns
-- (seq, prev_mac, mac) that the HMAC audit chain fills; UNIQUE(seq) keeps the chain
-- from forking when the daemon and the CLI append at once.
CREATE TABLE events (
    id        INTEGER PRIMARY KEY,
    at        TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    -- Normal | Warning
    severity  TEXT    NOT NULL,
    reason    TEXT    NOT NULL,
    message   TEXT    NOT NULL,
    -- Canonical JSON of the structured record, when there is one.
    record    TEXT,
    audited   BIGINT  NOT NULL DEFAULT 0,
    seq       BIGINT  UNIQUE,
    prev_mac  TEXT,
    mac       TEXT
);

CREATE INDEX events_by_object ON events (kind, name, id);
