-- 0015: the web UI's sessions, shared by every process on the database
-- and kept across restarts. Only the SHA-256 of a session id is stored.
-- A session is a token's (token_hash; the token is read on each request)
-- or a person's from single sign-on (person, role, owners as JSON).
-- idle_until moves with use and never passes expires_at, so a session has
-- ended once idle_until is past: the purge needs only that index. Times
-- are microseconds since the epoch, as elsewhere.
CREATE TABLE sessions (
    id_hash    TEXT    NOT NULL PRIMARY KEY,
    token_hash TEXT    NOT NULL DEFAULT '',
    person     TEXT    NOT NULL DEFAULT '',
    role       TEXT    NOT NULL DEFAULT '',
    owners     TEXT    NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    idle_until INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE INDEX sessions_idle_until ON sessions (idle_until);
