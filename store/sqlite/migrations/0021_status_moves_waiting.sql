-- 0021: one row trigger on a status change instead of three, and the
-- moves the stores count themselves skip it whole.
--
-- A status change fired the failure-group trigger (0007, skipped when
-- status_moves.counted marks the UPDATE) and the two waiting-minute
-- triggers (0017, never skipped): a chunk of a discard of 2,000
-- quarantined messages ran 2,000 waiting-minute updates, and checked
-- the mark twice more per message. The three are one trigger now, skipped
-- whole by a counted UPDATE: the stores' own moves (replay_groups.go:
-- the replay's and the discard's) move the waiting minutes per minute in
-- one go, as they move the failure groups per group. Every other status
-- change is counted by the trigger, as before.
DROP TRIGGER messages_waiting_left;
DROP TRIGGER messages_waiting_joined;
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
    UPDATE waiting_minutes SET n = n - 1
    WHERE old.status = 'quarantined'
        AND queue = old.queue AND minute = (old.failed_at - 1) / 60000000 * 60000000 AND owner = old.owner;
    INSERT INTO waiting_minutes (queue, owner, minute, n)
    SELECT new.queue, new.owner, (new.failed_at - 1) / 60000000 * 60000000, 1 WHERE new.status = 'quarantined'
    ON CONFLICT (queue, minute, owner) DO UPDATE SET n = n + 1;
END;
