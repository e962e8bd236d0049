-- Kind-specific observed status (for example an Adapter's resolved image ID), as JSON.
ALTER TABLE objects ADD COLUMN status_json TEXT;

-- Spec files that do not load, as of the latest scan; replaced wholesale by each scan.
CREATE TABLE file_errors (
    file     TEXT   NOT NULL,
    line     BIGINT NOT NULL,
    col      BIGINT NOT NULL,
    path     TEXT   NOT NULL,
    message  TEXT   NOT NULL,
    seen_at  TEXT   NOT NULL
);

-- `roundtable reconcile KIND/NAME` while a daemon runs: the daemon takes and deletes these.
CREATE TABLE reconcile_requests (
    id            INTEGER PRIMARY KEY,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    requested_at  TEXT NOT NULL
);
