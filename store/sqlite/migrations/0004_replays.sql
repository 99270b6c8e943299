-- 0004: replay batches, their items and the shared rate buckets, and the
-- key rule of each message.
--
-- A batch pins its messages as items (seq 0, 1, … in publication order)
-- when it is created. Counts per outcome are grouped from the items (at
-- most quarantine.MaxBulk per batch). Observe is in microseconds; queues
-- and owners are JSON arrays of text, distinct and sorted.

ALTER TABLE messages ADD COLUMN key_rule TEXT NOT NULL DEFAULT '';

CREATE TABLE replay_batches (
    id                TEXT    NOT NULL PRIMARY KEY,
    state             TEXT    NOT NULL,
    state_reason      TEXT    NOT NULL,
    reason            TEXT    NOT NULL,
    actor             TEXT    NOT NULL,
    dest_queue        TEXT    NOT NULL,
    dest_collector    TEXT    NOT NULL,
    rate              REAL    NOT NULL,
    burst             INTEGER NOT NULL,
    canary            INTEGER NOT NULL,
    observe           INTEGER NOT NULL,
    halt_refail_ratio REAL    NOT NULL,
    force_without_key INTEGER NOT NULL,
    queues            TEXT    NOT NULL,
    owners            TEXT    NOT NULL,
    total             INTEGER NOT NULL,
    canary_verdict    TEXT    NOT NULL,
    canary_until      INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    expires_at        INTEGER
);

-- RunnableReplays: running batches and drafts by expiry.
CREATE INDEX replay_batches_state ON replay_batches (state, id);

-- One row per pinned message. lease_owner is '' when not leased; fence
-- grows with every lease (and with a cancel), and a result must bring the
-- fence of its lease back.
CREATE TABLE replay_items (
    batch_id         TEXT    NOT NULL REFERENCES replay_batches (id),
    seq              INTEGER NOT NULL,
    message_id       TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    outcome          TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    destination      TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT    NOT NULL,
    payload_version  INTEGER NOT NULL DEFAULT 0,
    payload_sha256   TEXT    NOT NULL DEFAULT '',
    dropped_headers  TEXT    NOT NULL DEFAULT '[]',
    attempts         INTEGER NOT NULL DEFAULT 0,
    refail_id        TEXT    NOT NULL DEFAULT '',
    published_at     INTEGER,
    updated_at       INTEGER NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    fence            INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (batch_id, seq)
) WITHOUT ROWID;

-- The pending items of a batch in seq order (leases, start, cancel).
CREATE INDEX replay_items_pending ON replay_items (batch_id, seq) WHERE outcome = 'pending';
-- Counts by outcome read this index in order, without sorting the items.
CREATE INDEX replay_items_outcome ON replay_items (batch_id, outcome);
-- Results by message, and the re-failure link.
CREATE INDEX replay_items_message ON replay_items (message_id);

-- Token buckets shared by every engine using the database.
CREATE TABLE replay_buckets (
    key        TEXT    NOT NULL PRIMARY KEY,
    tokens     REAL    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A replay moves every message twice (quarantined -> replaying ->
-- replayed), oldest first, so each leaves its bucket at the lower bound.
-- The trigger of 0003 then recounted all three bounds; this one recounts
-- only the bound the message held.
DROP TRIGGER messages_status_moved;
CREATE TRIGGER messages_status_moved AFTER UPDATE OF status ON messages
WHEN old.status <> new.status
BEGIN
    INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name, failure_class, reason,
        n, first_failed_at, last_failed_at, example_id)
    VALUES (new.fingerprint, new.queue, new.owner, new.status, new.job_name, new.failure_class, new.reason,
        1, new.failed_at, new.failed_at, new.id)
    ON CONFLICT (fingerprint, queue, owner, status) DO UPDATE SET
        n = n + 1,
        first_failed_at = CASE WHEN n <= 0 OR excluded.first_failed_at < first_failed_at
            THEN excluded.first_failed_at ELSE first_failed_at END,
        last_failed_at = CASE WHEN n <= 0 OR excluded.last_failed_at > last_failed_at
            THEN excluded.last_failed_at ELSE last_failed_at END,
        example_id = CASE WHEN n <= 0 OR excluded.last_failed_at > last_failed_at
            OR (excluded.last_failed_at = last_failed_at AND excluded.example_id > example_id)
            THEN excluded.example_id ELSE example_id END;
    UPDATE failure_groups SET n = n - 1
    WHERE fingerprint = old.fingerprint AND queue = old.queue AND owner = old.owner AND status = old.status;
    UPDATE failure_groups SET
        first_failed_at = (SELECT m.failed_at FROM messages m WHERE m.queue = old.queue AND m.status = old.status
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at, m.id LIMIT 1)
    WHERE fingerprint = old.fingerprint AND queue = old.queue AND owner = old.owner AND status = old.status
        AND n > 0 AND old.failed_at <= first_failed_at;
    UPDATE failure_groups SET
        last_failed_at = (SELECT m.failed_at FROM messages m WHERE m.queue = old.queue AND m.status = old.status
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at DESC, m.id DESC LIMIT 1),
        example_id = (SELECT m.id FROM messages m WHERE m.queue = old.queue AND m.status = old.status
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)
    WHERE fingerprint = old.fingerprint AND queue = old.queue AND owner = old.owner AND status = old.status
        AND n > 0 AND (old.failed_at >= last_failed_at OR old.id = example_id);
END;
