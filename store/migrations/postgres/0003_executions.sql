-- One row per execution attempt of an Assignment.
CREATE TABLE sessions (
    id                   TEXT   PRIMARY KEY,
    assignment           TEXT   NOT NULL,
    execution_generation BIGINT NOT NULL,
    attempt              BIGINT NOT NULL,
    controller_run       TEXT   NOT NULL,
    adapter              TEXT   NOT NULL,
    image                TEXT,
    -- Queued | Running | Succeeded | Failed | Cancelled | Interrupted
    phase                TEXT   NOT NULL,
    cause                TEXT,
    exit_code            BIGINT,
    message              TEXT   NOT NULL,
    base_commit          TEXT,
    exec_dir             TEXT,
    stdout_bytes         BIGINT,
    stderr_bytes         BIGINT,
    stdout_truncated     BIGINT,
    stderr_truncated     BIGINT,
    external_session_id  TEXT,
    -- Manifest, self-check, rejected export entries and other details, as JSON.
    detail_json          TEXT,
    created_at           TEXT   NOT NULL,
    started_at           TEXT,
    finished_at          TEXT
);
CREATE INDEX sessions_by_assignment ON sessions (assignment, execution_generation);

-- Pending proposals: exactly one per execution generation of an Assignment.
CREATE TABLE proposals (
    id                   TEXT   PRIMARY KEY,
    session_id           TEXT   NOT NULL,
    assignment           TEXT   NOT NULL,
    execution_generation BIGINT NOT NULL,
    base_commit          TEXT   NOT NULL,
    adapter              TEXT   NOT NULL,
    patch_path           TEXT   NOT NULL,
    sha256               TEXT   NOT NULL,
    files_changed        BIGINT NOT NULL,
    insertions           BIGINT NOT NULL,
    deletions            BIGINT NOT NULL,
    flags_json           TEXT   NOT NULL,
    state                TEXT   NOT NULL,
    created_at           TEXT   NOT NULL,
    UNIQUE (assignment, execution_generation)
);
