-- Agent diagnostics: one report per probe of an adapter's image, kept whole as JSON (what was
-- shown is what is served again). Read by id, or by adapter newest first.
CREATE TABLE diagnostics (
    id           TEXT PRIMARY KEY,
    adapter      TEXT NOT NULL,
    report_json  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

CREATE INDEX diagnostics_by_adapter ON diagnostics (adapter, created_at);
