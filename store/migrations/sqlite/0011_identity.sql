-- Object identity. Every object gets a uid when it is first recorded; an object deleted and
-- declared again under the same name is a new object with a new uid (as in Kubernetes). What
-- belongs to one object's life (sessions, proposals, execution leases, events) carries its uid,
-- so a later object of the same name never inherits an earlier one's results.
ALTER TABLE objects ADD COLUMN uid TEXT;
UPDATE objects SET uid = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX objects_by_uid ON objects (uid);
-- The execution generation an operator asked to run afresh (`reconcile --rerun`): it never reuses
-- an earlier generation's result.
ALTER TABLE objects ADD COLUMN rerun_generation BIGINT;

-- Rows recorded before identity belong to the object of their name if they are not older than
-- it (a row older than the object is an earlier object's, since forgotten); otherwise the uid
-- stays NULL, which matches no object: kept for the record, never shown as anyone's result.
ALTER TABLE sessions ADD COLUMN assignment_uid TEXT;
-- The run-field digest the session ran: a later execution generation with the same digest at the
-- same base commit reuses its result instead of running again.
ALTER TABLE sessions ADD COLUMN execution_digest TEXT;
UPDATE sessions SET
    assignment_uid = (SELECT o.uid FROM objects o WHERE o.kind = 'Assignment' AND o.name = sessions.assignment AND o.created_at <= sessions.created_at),
    execution_digest = (SELECT o.execution_digest FROM objects o WHERE o.kind = 'Assignment' AND o.name = sessions.assignment AND o.created_at <= sessions.created_at AND o.execution_generation = sessions.execution_generation);
CREATE INDEX sessions_by_assignment_uid ON sessions (assignment_uid, execution_generation);

-- Proposals are unique per (uid, execution generation), not per name: SQLite cannot drop a table
-- constraint, so the table is rebuilt.
CREATE TABLE proposals_by_uid (
    id                   TEXT   PRIMARY KEY,
    session_id           TEXT   NOT NULL,
    assignment           TEXT   NOT NULL,
    assignment_uid       TEXT,
    execution_generation BIGINT NOT NULL,
    base_commit          TEXT   NOT NULL,
    adapter              TEXT   NOT NULL,
    patch_path           TEXT   NOT NULL,
    sha256               TEXT   NOT NULL,
    files_changed        BIGINT NOT NULL,
    insertions           BIGINT NOT NULL,
    deletions            BIGINT NOT NULL,
    flags_json           TEXT   NOT NULL,
    -- pending | superseded; superseded is written when the Assignment's run fields move on, and
    -- stays (it used to be worked out on read, and a deleted Assignment turned it pending again).
    state                TEXT   NOT NULL,
    created_at           TEXT   NOT NULL,
    rejected_json        TEXT,
    -- The proposal of an earlier execution generation whose result this one reuses, if any.
    reused_from          TEXT,
    UNIQUE (assignment_uid, execution_generation)
);
INSERT INTO proposals_by_uid (id, session_id, assignment, assignment_uid, execution_generation, base_commit, adapter, patch_path, sha256, files_changed, insertions, deletions, flags_json, state, created_at, rejected_json)
SELECT p.id, p.session_id, p.assignment,
       (SELECT o.uid FROM objects o WHERE o.kind = 'Assignment' AND o.name = p.assignment AND o.created_at <= p.created_at),
       p.execution_generation, p.base_commit, p.adapter, p.patch_path, p.sha256, p.files_changed, p.insertions, p.deletions, p.flags_json, p.state, p.created_at, p.rejected_json
FROM proposals p;
DROP TABLE proposals;
ALTER TABLE proposals_by_uid RENAME TO proposals;
UPDATE proposals SET state = 'superseded'
WHERE state = 'pending' AND EXISTS (SELECT 1 FROM objects o WHERE o.uid = proposals.assignment_uid AND o.execution_generation <> proposals.execution_generation);

-- Execution leases are per object: the lease of a deleted Assignment's run never holds back the
-- run of a new one of the same name. Leases of objects already forgotten are dropped.
CREATE TABLE execution_leases_by_uid (
    assignment_uid TEXT   PRIMARY KEY,
    assignment     TEXT   NOT NULL,
    holder         TEXT   NOT NULL,
    fence          BIGINT NOT NULL,
    acquired_at    TEXT   NOT NULL,
    expires_at     TEXT   NOT NULL,
    released_at    TEXT
);
INSERT INTO execution_leases_by_uid (assignment_uid, assignment, holder, fence, acquired_at, expires_at, released_at)
SELECT o.uid, l.assignment, l.holder, l.fence, l.acquired_at, l.expires_at, l.released_at
FROM execution_leases l JOIN objects o ON o.kind = 'Assignment' AND o.name = l.assignment;
DROP TABLE execution_leases;
ALTER TABLE execution_leases_by_uid RENAME TO execution_leases;
CREATE INDEX execution_leases_by_holder ON execution_leases (holder);

-- Events carry the uid of the object they were about when they were recorded.
ALTER TABLE events ADD COLUMN uid TEXT;
UPDATE events SET uid = (SELECT o.uid FROM objects o WHERE o.kind = events.kind AND o.name = events.name AND o.created_at <= events.at);
CREATE INDEX events_by_uid ON events (uid, id);
