-- 0007: the replay moves its messages' failure-group counts per group.
--
-- A replay moves every message twice (quarantined -> replaying when the
-- batch starts, replaying -> replayed or back to quarantined when its
-- result is recorded). The row trigger of 0004 did the failure-group
-- bookkeeping once per message, four statements each. The replay store
-- now does it once per group and statement (store/sqlite/replay_groups.go)
-- and, in the same transaction, raises status_moves.counted around its
-- own UPDATE of messages, which the trigger then skips. Every other status
-- change, whoever makes it, is still counted by the trigger.
CREATE TABLE status_moves (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    counted INTEGER NOT NULL
);
INSERT INTO status_moves (id, counted) VALUES (1, 0);

DROP TRIGGER messages_status_moved;
CREATE TRIGGER messages_status_moved AFTER UPDATE OF status ON messages
WHEN old.status <> new.status AND NOT (SELECT counted FROM status_moves WHERE id = 1)
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
