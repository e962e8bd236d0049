-- The credentials the daemon holds, as the review gates keep them (docs/delivery.md): per
-- `credentialEnv` name, the value's length and its keyed hash under a key derived from the audit
-- key. Never the value. An accept compares a proposal's added lines with these.
CREATE TABLE credential_fingerprints (
    name TEXT PRIMARY KEY,
    length INTEGER NOT NULL,
    digest TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
