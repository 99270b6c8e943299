-- 0015: the web UI's sessions, shared by every instance on the database
-- and kept across restarts. Only the SHA-256 of a session id is stored.
-- A session is a token's (token_hash; the token is read on each request)
-- or a person's from single sign-on (person, role, owners as JSON).
-- idle_until moves with use and never passes expires_at, so a session has
-- ended once idle_until is past: the purge needs only that index.
CREATE TABLE sessions (
    id_hash    text COLLATE "C" PRIMARY KEY,
    token_hash text NOT NULL DEFAULT '',
    person     text NOT NULL DEFAULT '',
    role       text NOT NULL DEFAULT '',
    owners     text NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    idle_until timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX sessions_idle_until_idx ON sessions (idle_until);
