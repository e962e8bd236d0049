-- Controllers sharing this store. Each `roundtable start` registers, heartbeats, and marks itself
-- stopped when it ends; one whose heartbeat expired is gone (killed, or cut off).
CREATE TABLE controllers (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           BIGINT NOT NULL,
    checkout      TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    heartbeat_at  TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    stopped_at    TEXT,
    -- The checkout's git commit at its last scan, and why it did not write desired state then
    -- (its checkout is behind the store's desired revision), if it did not.
    revision      TEXT,
    sync_note     TEXT
);

-- The git commit the shared desired state was last written from (one row). A controller writes
-- specs only while its checkout is at that commit or a descendant of it (advancing it first), and
-- the check runs inside the write: a checkout that is behind never rolls an object back.
CREATE TABLE desired_revision (
    id          BIGINT PRIMARY KEY,
    revision    TEXT   NOT NULL,
    controller  TEXT   NOT NULL,
    at          TEXT   NOT NULL
);

-- Which controller runs an Assignment's execution. A claim is a compare-and-set on `fence`, which
-- goes up with every claim and release; every write about the execution carries the fence it was
-- claimed with, so a controller whose lease was taken over can no longer record anything.
CREATE TABLE execution_leases (
    assignment   TEXT   PRIMARY KEY,
    holder       TEXT   NOT NULL,
    fence        BIGINT NOT NULL,
    acquired_at  TEXT   NOT NULL,
    expires_at   TEXT   NOT NULL,
    released_at  TEXT
);
CREATE INDEX execution_leases_by_holder ON execution_leases (holder);

-- Patches of proposals made by a controller sharing the store, so that any host can export them
-- (the file is in the state directory of the host that made it). Checked against the proposal's
-- SHA-256 like the file.
CREATE TABLE proposal_patches (
    proposal_id  TEXT PRIMARY KEY,
    patch        BYTEA NOT NULL
);
