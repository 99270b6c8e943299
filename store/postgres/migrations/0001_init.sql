-- 0001_init: the quarantine schema.
--
-- Every object is unqualified, so it lands in the first schema of the
-- connection's search_path (tests isolate themselves with a schema each).
-- pg_trgm is database-wide: it lives in schema public and its operator
-- class is referenced as public.gin_trgm_ops. Migrate holds an advisory
-- lock, so concurrent migrations of several schemas do not race on it.
--
-- Identifier-like columns use COLLATE "C": byte order, the same order the
-- SQLite store uses, whatever the database's default collation is, and the
-- cheapest comparison for the keyset (failed_at, id).

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

-- One row per message. Headers and flags are JSON text. The payload bytes
-- are not here: they live only in payload_versions (the current version is
-- payload_version).
CREATE TABLE messages (
    id              text COLLATE "C" PRIMARY KEY,
    source          text COLLATE "C" NOT NULL,
    source_kind     text COLLATE "C" NOT NULL,
    queue           text COLLATE "C" NOT NULL,
    job_name        text COLLATE "C" NOT NULL,
    message_id      text COLLATE "C" NOT NULL,
    idempotency_key text COLLATE "C" NOT NULL,
    schema_version  text NOT NULL,
    attempts        integer NOT NULL,
    failure_class   text COLLATE "C" NOT NULL,
    reason          text NOT NULL,
    payload_size    bigint NOT NULL,
    content_type    text NOT NULL,
    payload_sha256  text NOT NULL,
    payload_version integer NOT NULL,
    headers         text NOT NULL,
    enqueued_at     timestamptz,
    first_failed_at timestamptz,
    failed_at       timestamptz NOT NULL,
    collected_at    timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    status          text COLLATE "C" NOT NULL,
    owner           text COLLATE "C" NOT NULL,
    fingerprint     text COLLATE "C" NOT NULL,
    replay_count    integer NOT NULL,
    refail_of       text COLLATE "C" NOT NULL,
    flags           text NOT NULL,
    dedupe_key      text COLLATE "C" NOT NULL,
    CONSTRAINT messages_source_dedupe_key_key UNIQUE (source, dedupe_key)
);

-- Lists are ordered by (failed_at DESC, id DESC) and paged by a keyset on
-- the same pair: one index per equality filter, each ending in that pair.
CREATE INDEX messages_failed_at_idx ON messages (failed_at, id);
CREATE INDEX messages_queue_idx ON messages (queue, failed_at, id);
CREATE INDEX messages_status_idx ON messages (status, failed_at, id);
CREATE INDEX messages_owner_idx ON messages (owner, failed_at, id);
CREATE INDEX messages_job_name_idx ON messages (job_name, failed_at, id);
CREATE INDEX messages_failure_class_idx ON messages (failure_class, failed_at, id);
CREATE INDEX messages_source_idx ON messages (source, failed_at, id);
CREATE INDEX messages_idempotency_key_idx ON messages (idempotency_key, failed_at, id);
-- Count by queue and status: a narrow index, so that counting reads it
-- alone (an index-only scan, in queue order) instead of the wide table.
CREATE INDEX messages_queue_status_idx ON messages (queue, status);
-- The oldest quarantined message of each queue: one probe per queue.
CREATE INDEX messages_oldest_idx ON messages (queue, failed_at, id) WHERE status = 'quarantined';
-- Filter.Text: case-insensitive substring (ILIKE) over the reason.
CREATE INDEX messages_reason_trgm_idx ON messages USING gin (reason public.gin_trgm_ops);

-- Every payload a message held. The bytes are stored once: in payload_text
-- when they are valid UTF-8 without NUL (so that text search can read and
-- index them), otherwise in payload; exactly one of the two is NULL.
CREATE TABLE payload_versions (
    message_id   text COLLATE "C" NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    version      integer NOT NULL,
    sha256       text NOT NULL,
    prev_sha256  text NOT NULL,
    size         bigint NOT NULL,
    content_type text NOT NULL,
    actor        text NOT NULL,
    reason       text NOT NULL,
    created_at   timestamptz NOT NULL,
    payload      bytea,
    payload_text text,
    PRIMARY KEY (message_id, version),
    CONSTRAINT payload_versions_one_copy CHECK ((payload IS NULL) <> (payload_text IS NULL))
);

-- Filter.Text over the payload (text payloads only).
CREATE INDEX payload_versions_text_trgm_idx ON payload_versions USING gin (payload_text public.gin_trgm_ops);

-- The append-only, hash-chained audit log. details is the canonical JSON
-- text that was hashed, kept byte for byte.
CREATE TABLE audit_log (
    seq       bigint PRIMARY KEY,
    time      timestamptz NOT NULL,
    actor     text NOT NULL,
    action    text NOT NULL,
    subject   text NOT NULL,
    details   text NOT NULL,
    prev_hash text NOT NULL,
    hash      text NOT NULL
);

CREATE INDEX audit_log_subject_idx ON audit_log (subject, seq);

-- UPDATE, DELETE and TRUNCATE of the audit log are refused. The triggers
-- are statement-level, so even a statement that would touch no row fails.
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit events can only be appended; the hash chain detects any change';
END
$$;

CREATE TRIGGER audit_log_append_only_change
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TRIGGER audit_log_append_only_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- The head of the chain, updated in the transaction of every append; the
-- row lock taken on it (SELECT ... FOR UPDATE) serialises appends.
CREATE TABLE audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash text NOT NULL
);

INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- API tokens: only the SHA-256 of the secret is stored. Owners is a JSON
-- array. One active token per name.
CREATE TABLE tokens (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    role        text NOT NULL,
    owners      text NOT NULL,
    secret_hash text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    revoked_at  timestamptz
);

CREATE UNIQUE INDEX tokens_active_name_idx ON tokens (name) WHERE revoked_at IS NULL;
