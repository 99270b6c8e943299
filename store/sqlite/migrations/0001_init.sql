-- 0001: messages, payload versions, the hash-chained audit log, tokens.
--
-- Times are INTEGER unix microseconds, UTC. Headers and flags are JSON text.
-- Payload bytes live only in payload_versions: payload_text holds them when
-- they are valid UTF-8 without NUL (searchable by Filter.Text), payload
-- holds them otherwise; exactly one of the two is NOT NULL.

CREATE TABLE messages (
    id              TEXT    NOT NULL PRIMARY KEY,
    source          TEXT    NOT NULL,
    source_kind     TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    job_name        TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    schema_version  TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    failure_class   TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    payload_size    INTEGER NOT NULL,
    content_type    TEXT    NOT NULL,
    payload_sha256  TEXT    NOT NULL,
    payload_version INTEGER NOT NULL,
    headers         TEXT    NOT NULL,
    enqueued_at     INTEGER,
    first_failed_at INTEGER,
    failed_at       INTEGER NOT NULL,
    collected_at    INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    replay_count    INTEGER NOT NULL DEFAULT 0,
    refail_of       TEXT    NOT NULL DEFAULT '',
    flags           TEXT    NOT NULL,
    dedupe_key      TEXT    NOT NULL,
    UNIQUE (source, dedupe_key)
);

-- Every list is ordered by (failed_at DESC, id DESC); each equality filter
-- has an index that yields that order.
CREATE INDEX messages_failed_at       ON messages (failed_at, id);
CREATE INDEX messages_queue           ON messages (queue, failed_at, id);
CREATE INDEX messages_status          ON messages (status, failed_at, id);
CREATE INDEX messages_owner           ON messages (owner, failed_at, id);
CREATE INDEX messages_job_name        ON messages (job_name, failed_at, id);
CREATE INDEX messages_failure_class   ON messages (failure_class, failed_at, id);
CREATE INDEX messages_source          ON messages (source, failed_at, id);
CREATE INDEX messages_idempotency_key ON messages (idempotency_key, failed_at, id);
-- Counts by queue and status, and the oldest quarantined message per queue.
CREATE INDEX messages_queue_status    ON messages (queue, status, failed_at, id);

CREATE TABLE payload_versions (
    message_id   TEXT    NOT NULL REFERENCES messages (id),
    version      INTEGER NOT NULL,
    sha256       TEXT    NOT NULL,
    prev_sha256  TEXT    NOT NULL DEFAULT '',
    size         INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    payload      BLOB,
    payload_text TEXT,
    PRIMARY KEY (message_id, version),
    CHECK ((payload IS NULL) <> (payload_text IS NULL))
);

-- Append-only: rows are only ever inserted (triggers below). audit_head is
-- updated in the transaction of every append; a chain that goes past it or
-- stops short of it was altered outside the service.
CREATE TABLE audit_log (
    seq       INTEGER NOT NULL PRIMARY KEY,
    time      INTEGER NOT NULL,
    actor     TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    subject   TEXT    NOT NULL,
    details   TEXT    NOT NULL,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL
);

CREATE INDEX audit_log_subject ON audit_log (subject, seq);
CREATE INDEX audit_log_actor   ON audit_log (actor, seq);
CREATE INDEX audit_log_time    ON audit_log (time, seq);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TABLE audit_head (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT    NOT NULL
);

INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE tokens (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    role        TEXT    NOT NULL,
    owners      TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL,
    revoked_at  INTEGER
);

-- At most one active token per name.
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
