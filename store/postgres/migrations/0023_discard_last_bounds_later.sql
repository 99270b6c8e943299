-- 0023_discard_last_bounds_later: a chunk of a discard operation leaves
-- the last bound and the example of the failure groups its messages
-- leave for the end of the operation, as SQLite's chunks do.
--
-- A discard operation walks its set newest first (by failed_at and id,
-- as the message list pages it: its chunk's entries are then neighbours
-- in the indexes keyed by time after a column of few values), so every
-- chunk takes the latest message of nearly every bucket (fingerprint,
-- queue, owner, status) it touches, and messages_counts_update recounted
-- the last bound of each from messages, every chunk: a walk down the
-- queue-and-status index past the entries of every message the operation
-- discarded so far (figures in docs/discard-at-scale.md). A transaction
-- that sets quarantine.last_bounds_later to 'on' (set_config(..., true):
-- for that transaction only) has the trigger recount only first bounds;
-- the counts stay exact, and the last bound and example of a bucket its
-- messages left may name a message no longer in it until
-- quarantine_repair_last_bounds runs (the store calls it when the
-- operation completes or fails). Any other writer (collectors, replays,
-- an operation of the previous release) leaves the setting off and
-- keeps every bound exact as before.
CREATE OR REPLACE FUNCTION messages_counts_update() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    g record;
    later boolean := coalesce(current_setting('quarantine.last_bounds_later', true), '') = 'on';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status IS DISTINCT FROM n.status) THEN
        RETURN NULL; -- no status changed (an edit, a purge)
    END IF;

    WITH moved AS (
        SELECT o.id, o.fingerprint, o.queue, o.owner, o.job_name, o.failure_class, o.reason,
            o.status AS old_status, n.status AS new_status, o.failed_at
        FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status IS DISTINCT FROM n.status)
    SELECT array_agg(fingerprint) AS fp, array_agg(queue) AS queue, array_agg(owner) AS owner,
        array_agg(status) AS status, array_agg(job_name) AS job, array_agg(failure_class) AS class,
        array_agg(reason) AS reason, array_agg(n) AS n, array_agg(first_at) AS first_at,
        array_agg(last_at) AS last_at, array_agg(example) AS example
    INTO g FROM (
        SELECT fingerprint, queue, owner, status, min(job_name) AS job_name, min(failure_class) AS failure_class,
            min(reason) AS reason, sum(n)::bigint AS n, min(failed_at) AS first_at, max(failed_at) AS last_at,
            (array_agg(id ORDER BY failed_at DESC, id DESC) FILTER (WHERE id IS NOT NULL))[1] AS example
        FROM (
            SELECT fingerprint, queue, owner, new_status AS status, job_name, failure_class, reason, 1 AS n, failed_at, id
            FROM moved
            UNION ALL
            SELECT fingerprint, queue, owner, old_status, job_name, failure_class, reason, -1, NULL, NULL
            FROM moved) x
        GROUP BY 1, 2, 3, 4) d;

    PERFORM quarantine_fold(g.fp, g.queue, g.owner, g.status, g.job, g.class, g.reason, g.n,
        g.first_at, g.last_at, g.example);

    -- A message that left a bucket at one of its bounds: recount them
    -- (the last bound and the example are left for later when the
    -- transaction says so). Each bound is looked for first among the 100 messages of its queue
    -- and status nearest to it (messages_queue_status_idx in order), then,
    -- if none of those is in the bucket, in the whole bucket.
    WITH moved AS (
        SELECT o.id, o.fingerprint, o.queue, o.owner, o.status AS old_status, o.failed_at
        FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status IS DISTINCT FROM n.status)
    UPDATE failure_groups b SET
        first_failed_at = (SELECT u.failed_at FROM (
            (SELECT f.failed_at FROM (SELECT m.failed_at, m.id, m.fingerprint, m.owner FROM messages m
                WHERE m.queue = b.queue AND m.status = b.status ORDER BY m.failed_at, m.id LIMIT 100) f
            WHERE f.fingerprint = b.fingerprint AND f.owner = b.owner ORDER BY f.failed_at, f.id LIMIT 1)
            UNION ALL
            (SELECT m.failed_at FROM messages m
            WHERE m.queue = b.queue AND m.status = b.status AND m.fingerprint = b.fingerprint AND m.owner = b.owner
            ORDER BY m.failed_at, m.id LIMIT 1)) u LIMIT 1),
        (last_failed_at, example_id) = (SELECT u.failed_at, u.id FROM (
            (SELECT f.failed_at, f.id FROM (SELECT m.failed_at, m.id, m.fingerprint, m.owner FROM messages m
                WHERE m.queue = b.queue AND m.status = b.status ORDER BY m.failed_at DESC, m.id DESC LIMIT 100) f
            WHERE f.fingerprint = b.fingerprint AND f.owner = b.owner ORDER BY f.failed_at DESC, f.id DESC LIMIT 1)
            UNION ALL
            (SELECT m.failed_at, m.id FROM messages m
            WHERE m.queue = b.queue AND m.status = b.status AND m.fingerprint = b.fingerprint AND m.owner = b.owner
            ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)) u LIMIT 1)
    FROM (SELECT DISTINCT x.fingerprint, x.queue, x.owner, x.old_status AS status FROM moved x
        JOIN failure_groups c ON c.fingerprint = x.fingerprint AND c.queue = x.queue AND c.owner = x.owner AND c.status = x.old_status
        WHERE c.n > 0 AND (x.failed_at <= c.first_failed_at
            OR (NOT later AND (x.failed_at >= c.last_failed_at OR x.id = c.example_id)))) s
    WHERE b.fingerprint = s.fingerprint AND b.queue = s.queue AND b.owner = s.owner AND b.status = s.status;
    RETURN NULL;
END
$$;

-- quarantine_repair_last_bounds recounts the last bound and example of
-- every bucket whose example is no longer in the bucket's status (left
-- behind by a transaction with quarantine.last_bounds_later on): as
-- messages_counts_update does, from the 100 messages of its queue and
-- status nearest to the bound, else from the whole bucket. The buckets
-- are locked in key order first, as every writer of failure_groups
-- locks them, so that it cannot deadlock with a collector's insert.
CREATE OR REPLACE FUNCTION quarantine_repair_last_bounds() RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH stale AS (
        SELECT g.fingerprint, g.queue, g.owner, g.status FROM failure_groups g
        WHERE g.n > 0 AND NOT EXISTS (SELECT 1 FROM messages e WHERE e.id = g.example_id AND e.status = g.status)
        ORDER BY 1, 2, 3, 4 FOR UPDATE)
    UPDATE failure_groups b SET
        (last_failed_at, example_id) = (SELECT u.failed_at, u.id FROM (
            (SELECT f.failed_at, f.id FROM (SELECT m.failed_at, m.id, m.fingerprint, m.owner FROM messages m
                WHERE m.queue = b.queue AND m.status = b.status ORDER BY m.failed_at DESC, m.id DESC LIMIT 100) f
            WHERE f.fingerprint = b.fingerprint AND f.owner = b.owner ORDER BY f.failed_at DESC, f.id DESC LIMIT 1)
            UNION ALL
            (SELECT m.failed_at, m.id FROM messages m
            WHERE m.queue = b.queue AND m.status = b.status AND m.fingerprint = b.fingerprint AND m.owner = b.owner
            ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)) u LIMIT 1)
    FROM stale s
    WHERE b.fingerprint = s.fingerprint AND b.queue = s.queue AND b.owner = s.owner AND b.status = s.status;
$$;
