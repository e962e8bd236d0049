-- Where the desired state comes from (one row), for `status`: the mode (`committed`: a local
-- checkout's HEAD; `git`: a remote's branch through a bare mirror), the source (its URL with any
-- credentials redacted, and branch), the commit reconciled and when it was fetched, and the last
-- fetch's failure while the last good commit is kept. A working-tree controller removes the row.
-- Runtime state: `state migrate` does not copy it.
CREATE TABLE source_sync (
    id           BIGINT PRIMARY KEY,
    mode         TEXT   NOT NULL,
    url          TEXT   NOT NULL,
    branch       TEXT   NOT NULL,
    spec_path    TEXT   NOT NULL,
    commit_id    TEXT,
    fetched_at   TEXT,
    error        TEXT,
    error_at     TEXT,
    controller   TEXT   NOT NULL,
    updated_at   TEXT   NOT NULL
);
