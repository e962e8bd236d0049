-- Object identity: see the SQLite migration of the same number for why each step is there.
ALTER TABLE objects ADD COLUMN uid TEXT;
UPDATE objects SET uid = replace(gen_random_uuid()::text, '-', '');
CREATE UNIQUE INDEX objects_by_uid ON objects (uid);
-- The execution generation an operator asked to run afresh (`reconcile --rerun`): it never reuses
-- an earlier generation's result.
ALTER TABLE objects ADD COLUMN rerun_generation BIGINT;

ALTER TABLE sessions ADD COLUMN assignment_uid TEXT;
ALTER TABLE sessions ADD COLUMN execution_digest TEXT;
UPDATE sessions SET
    assignment_uid = (SELECT o.uid FROM objects o WHERE o.kind = 'Assignment' AND o.name = sessions.assignment AND o.created_at <= sessions.created_at),
    execution_digest = (SELECT o.execution_digest FROM objects o WHERE o.kind = 'Assignment' AND o.name = sessions.assignment AND o.created_at <= sessions.created_at AND o.execution_generation = sessions.execution_generation);
CREATE INDEX sessions_by_assignment_uid ON sessions (assignment_uid, execution_generation);

ALTER TABLE proposals ADD COLUMN assignment_uid TEXT;
ALTER TABLE proposals ADD COLUMN reused_from TEXT;
UPDATE proposals SET assignment_uid = (SELECT o.uid FROM objects o WHERE o.kind = 'Assignment' AND o.name = proposals.assignment AND o.created_at <= proposals.created_at);
ALTER TABLE proposals DROP CONSTRAINT proposals_assignment_execution_generation_key;
ALTER TABLE proposals ADD CONSTRAINT proposals_by_uid UNIQUE (assignment_uid, execution_generation);
UPDATE proposals SET state = 'superseded'
WHERE state = 'pending' AND EXISTS (SELECT 1 FROM objects o WHERE o.uid = proposals.assignment_uid AND o.execution_generation <> proposals.execution_generation);

ALTER TABLE execution_leases ADD COLUMN assignment_uid TEXT;
UPDATE execution_leases SET assignment_uid = (SELECT o.uid FROM objects o WHERE o.kind = 'Assignment' AND o.name = execution_leases.assignment);
DELETE FROM execution_leases WHERE assignment_uid IS NULL;
ALTER TABLE execution_leases DROP CONSTRAINT execution_leases_pkey;
ALTER TABLE execution_leases ADD PRIMARY KEY (assignment_uid);

ALTER TABLE events ADD COLUMN uid TEXT;
UPDATE events SET uid = (SELECT o.uid FROM objects o WHERE o.kind = events.kind AND o.name = events.name AND o.created_at <= events.at);
CREATE INDEX events_by_uid ON events (uid, id);
