-- 0003: counters by failure group, so that Groups, CountByQueue,
-- QueueStats and stratified samples stop grouping every message.

-- Failure groups by fingerprint, split by queue, owner and status: the
-- counters behind Groups, CountByQueue, QueueStats and stratified
-- samples, so that they read a few rows per group instead of grouping
-- every message. InsertBatch folds each batch in; the trigger below moves
-- a message between buckets when its status changes (whoever changes it)
-- and recounts a bucket's bounds when a message leaves it at one of them.
-- The example is the latest failure, by (failed_at, id). Queue, owner and
-- fingerprint of a message never change.
CREATE TABLE failure_groups (
    fingerprint     TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    owner           TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    job_name        TEXT    NOT NULL,
    failure_class   TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    n               INTEGER NOT NULL,
    first_failed_at INTEGER,
    last_failed_at  INTEGER,
    example_id      TEXT,
    PRIMARY KEY (fingerprint, queue, owner, status)
) WITHOUT ROWID;

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
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at, m.id LIMIT 1),
        last_failed_at = (SELECT m.failed_at FROM messages m WHERE m.queue = old.queue AND m.status = old.status
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at DESC, m.id DESC LIMIT 1),
        example_id = (SELECT m.id FROM messages m WHERE m.queue = old.queue AND m.status = old.status
            AND m.fingerprint = old.fingerprint AND m.owner = old.owner ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)
    WHERE fingerprint = old.fingerprint AND queue = old.queue AND owner = old.owner AND status = old.status
        AND n > 0 AND (old.failed_at <= first_failed_at OR old.failed_at >= last_failed_at OR old.id = example_id);
END;

-- The messages of an upgrade from 0001, counted once.
INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name, failure_class, reason,
    n, first_failed_at, last_failed_at, example_id)
SELECT fingerprint, queue, owner, status, min(job_name), min(failure_class), min(reason), count(*),
    min(failed_at), max(failed_at),
    substr(max(printf('%020d', failed_at + 100000000000000000) || id), 21)
FROM messages GROUP BY 1, 2, 3, 4;
