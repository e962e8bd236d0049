-- What agents leave for each other and for the operator through the MCP endpoint: notes on an
-- assignment, path claims with expiry, and the last heartbeat of each session.
CREATE TABLE notes (
    id          INTEGER PRIMARY KEY,
    assignment  TEXT    NOT NULL,
    session_id  TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL
);
CREATE INDEX notes_by_assignment ON notes (assignment, id);

-- A path is a file (`src/a.rs`) or a folder (`docs/`). A claim is live until it expires or is
-- released; the holder's session ending makes it stale (released by `resume`).
CREATE TABLE claims (
    path         TEXT   NOT NULL,
    session_id   TEXT   NOT NULL,
    assignment   TEXT   NOT NULL,
    acquired_at  TEXT   NOT NULL,
    expires_at   TEXT   NOT NULL,
    released_at  TEXT,
    PRIMARY KEY (path, session_id)
);
CREATE INDEX claims_live ON claims (released_at, expires_at);

CREATE TABLE heartbeats (
    session_id  TEXT PRIMARY KEY,
    at          TEXT NOT NULL,
    status      TEXT NOT NULL
);
