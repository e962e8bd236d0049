-- The repository's own id (one row): 16 random bytes in hex, made once when the store is created,
-- or when this migration first runs on an existing store, and never derived from the project's
-- path. It keys what outlives a session (persistent provider homes), so that a new repository at
-- a reused path (a CI runner's checkout folder) never gets an old one's. `keyed_at` is when it was
-- made: provider sessions recorded before it ran in homes named the old way, and are not resumed.
CREATE TABLE repository (
    id        BIGINT PRIMARY KEY,
    key       TEXT   NOT NULL,
    keyed_at  TEXT   NOT NULL
);

-- gen_random_uuid() is built in since PostgreSQL 13: 122 random bits, its hex without dashes.
INSERT INTO repository (id, key, keyed_at)
VALUES (1, replace(gen_random_uuid()::text, '-', ''),
        to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '000Z');
