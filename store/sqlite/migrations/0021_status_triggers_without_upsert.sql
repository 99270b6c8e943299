-- 0021: the triggers of a status change hold no upsert, so that the
-- stores' own moves of many messages (replay_groups.go: a chunk of a
-- discard operation, a replay's lease and record) run without a
-- statement journal.
--
-- SQLite copies every page an UPDATE of several rows changes into a
-- statement journal (spilled to a temporary file, one write per page)
-- when the statement may fail alone, to undo it alone. An UPDATE OR
-- ROLLBACK cannot: any failure rolls the whole transaction back, which is
-- what the stores do with a failed write anyway. But the conflict clause
-- of an upsert's DO UPDATE is ABORT whatever the outer statement's, so
-- the two triggers below, compiled into every UPDATE of the status, kept
-- the journal. Each now inserts the missing row (n = 0, taking the
-- bounds of the first message as an upsert's n <= 0 case did) when there
-- is none, and then updates it: the same counts, no conflict to resolve.
DROP TRIGGER messages_status_moved;
CREATE TRIGGER messages_status_moved AFTER UPDATE OF status ON messages
WHEN old.status <> new.status AND NOT (SELECT counted FROM status_moves WHERE id = 1)
BEGIN
    INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name, failure_class, reason,
        n, first_failed_at, last_failed_at, example_id)
    SELECT new.fingerprint, new.queue, new.owner, new.status, new.job_name, new.failure_class, new.reason,
        0, new.failed_at, new.failed_at, new.id
    WHERE NOT EXISTS (SELECT 1 FROM failure_groups WHERE fingerprint = new.fingerprint AND queue = new.queue
        AND owner = new.owner AND status = new.status);
    UPDATE failure_groups SET
        n = n + 1,
        first_failed_at = CASE WHEN n <= 0 OR new.failed_at < first_failed_at
            THEN new.failed_at ELSE first_failed_at END,
        last_failed_at = CASE WHEN n <= 0 OR new.failed_at > last_failed_at
            THEN new.failed_at ELSE last_failed_at END,
        example_id = CASE WHEN n <= 0 OR new.failed_at > last_failed_at
            OR (new.failed_at = last_failed_at AND new.id > example_id)
            THEN new.id ELSE example_id END
    WHERE fingerprint = new.fingerprint AND queue = new.queue AND owner = new.owner AND status = new.status;
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

DROP TRIGGER messages_waiting_joined;
CREATE TRIGGER messages_waiting_joined AFTER UPDATE OF status ON messages
WHEN new.status = 'quarantined' AND old.status <> 'quarantined'
BEGIN
    INSERT INTO waiting_minutes (queue, owner, minute, n)
    SELECT new.queue, new.owner, (new.failed_at - 1) / 60000000 * 60000000, 0
    WHERE NOT EXISTS (SELECT 1 FROM waiting_minutes WHERE queue = new.queue
        AND minute = (new.failed_at - 1) / 60000000 * 60000000 AND owner = new.owner);
    UPDATE waiting_minutes SET n = n + 1
    WHERE queue = new.queue AND minute = (new.failed_at - 1) / 60000000 * 60000000 AND owner = new.owner;
END;
