-- 0002_operations: what edits, discards, samples, failure groups, queue
-- statistics, the retention purge and the re-failure link need, and a
-- cheaper insert path.

-- Inserts: the trigram indexes cost more than all the btree indexes
-- together (a 1 KiB payload holds hundreds of trigrams). Text search now
-- walks the newest candidates in list order and tests each (text.go).
DROP INDEX payload_versions_text_trgm_idx;
DROP INDEX messages_reason_trgm_idx;
-- Versions are only written by the store, in the transaction that writes
-- their message; the foreign key check cost as much as an index per row.
ALTER TABLE payload_versions DROP CONSTRAINT payload_versions_message_id_fkey;
-- The retention purge removes the bytes: both copies NULL means purged.
ALTER TABLE payload_versions DROP CONSTRAINT payload_versions_one_copy;
ALTER TABLE payload_versions ADD CONSTRAINT payload_versions_one_copy CHECK (payload IS NULL OR payload_text IS NULL);

-- Sampling: a rank drawn uniformly from [0, 2^52) when the row is stored
-- (the volatile default gives each existing row its own draw too). A
-- sample is the arc of ranks after an offset the seed picks.
ALTER TABLE messages ADD COLUMN sample_rank bigint NOT NULL
    DEFAULT floor(random() * 4503599627370496)::bigint;
CREATE INDEX messages_sample_idx ON messages (sample_rank, id);
-- Stratified by fingerprint: one arc per group.
CREATE INDEX messages_fingerprint_sample_idx ON messages (fingerprint, sample_rank, id);

-- Queue and status together: the filtered list (queue+status) in order,
-- the oldest quarantined message of each queue, and the recount of a
-- failure group's bounds. Replaces the two narrower indexes.
DROP INDEX messages_queue_status_idx;
DROP INDEX messages_oldest_idx;
CREATE INDEX messages_queue_status_idx ON messages (queue, status, failed_at, id);

-- Listing by status: new messages are quarantined, and a list of
-- quarantined messages walks messages_failed_at_idx (most messages are
-- quarantined) or messages_queue_status_idx; only the other statuses need
-- their own index, which inserts then skip. The store writes statuses as
-- literals so that the planner can match the predicate.
DROP INDEX messages_status_idx;
CREATE INDEX messages_status_idx ON messages (status, failed_at, id) WHERE status <> 'quarantined';

-- Listing by source (a handful of collectors): the unique index
-- (source, dedupe_key) finds the messages of a rare source, and a common
-- one fills a page walking messages_failed_at_idx. One index less to
-- write per message.
DROP INDEX messages_source_idx;

-- Inflow per queue by collection time, index-only (owner for its filter).
CREATE INDEX messages_inflow_idx ON messages (queue, collected_at) INCLUDE (owner);

-- The re-failure link looks up replayed messages by idempotency key; few
-- rows are replayed at a time, so the index is small and cheap to keep.
CREATE INDEX messages_replayed_key_idx ON messages (idempotency_key) WHERE status = 'replayed';

-- The retention purge: terminal messages whose payload is still there.
CREATE INDEX messages_purge_idx ON messages (status, updated_at, id)
    WHERE status IN ('replayed', 'refailed', 'discarded') AND flags NOT LIKE '%"payload_purged"%';

-- Failure groups by fingerprint, split by queue, owner and status: the
-- counters behind Groups, CountByQueue, QueueStats and stratified
-- samples. A filter on those fields, or on job_name and failure_class
-- (which the fingerprint determines), reads this table instead of
-- grouping messages; counts by queue and status are its sums. The example
-- is the latest failure, by (failed_at, id). Kept in the transaction of
-- every insert (by InsertBatch, in its insert statement) and of every
-- status change (by the trigger below, whoever changes the status), rows
-- always locked in key order, so that writers cannot deadlock on it. When
-- a message leaves a bucket at one of its bounds, the bounds are recounted
-- from messages. Queue, owner and fingerprint of a message never change.
CREATE TABLE failure_groups (
    fingerprint     text COLLATE "C" NOT NULL,
    queue           text COLLATE "C" NOT NULL,
    owner           text COLLATE "C" NOT NULL,
    status          text COLLATE "C" NOT NULL,
    job_name        text COLLATE "C" NOT NULL,
    failure_class   text COLLATE "C" NOT NULL,
    reason          text NOT NULL,
    n               bigint NOT NULL,
    first_failed_at timestamptz,
    last_failed_at  timestamptz,
    example_id      text COLLATE "C",
    PRIMARY KEY (fingerprint, queue, owner, status)
);

-- No other index: the table is small (groups x queues x statuses), and
-- an index on n would make every count update a non-HOT update.

-- quarantine_fold adds (or, with negative n, removes) counts, rows in key
-- order. A bucket that was empty takes the new bounds; an upsert without
-- bounds (a removal) keeps the old ones.
CREATE FUNCTION quarantine_fold(g_fp text[], g_queue text[], g_owner text[], g_status text[], g_job text[],
        g_class text[], g_reason text[], g_n bigint[], g_first timestamptz[], g_last timestamptz[], g_example text[])
RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    INSERT INTO failure_groups AS g (fingerprint, queue, owner, status, job_name, failure_class, reason,
        n, first_failed_at, last_failed_at, example_id)
    SELECT * FROM unnest(g_fp, g_queue, g_owner, g_status, g_job, g_class, g_reason, g_n, g_first, g_last, g_example)
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (fingerprint, queue, owner, status) DO UPDATE SET
        n = g.n + EXCLUDED.n,
        first_failed_at = CASE WHEN g.n <= 0 THEN EXCLUDED.first_failed_at
            ELSE least(g.first_failed_at, EXCLUDED.first_failed_at) END,
        last_failed_at = CASE WHEN g.n <= 0 THEN EXCLUDED.last_failed_at
            ELSE greatest(g.last_failed_at, EXCLUDED.last_failed_at) END,
        example_id = CASE
            WHEN g.n <= 0 THEN EXCLUDED.example_id
            WHEN EXCLUDED.example_id IS NULL THEN g.example_id
            WHEN (EXCLUDED.last_failed_at, EXCLUDED.example_id) > (g.last_failed_at, g.example_id) THEN EXCLUDED.example_id
            ELSE g.example_id END;
$$;

CREATE FUNCTION messages_counts_update() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    g record;
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

    -- A message that left a bucket at one of its bounds: recount them.
    WITH moved AS (
        SELECT o.id, o.fingerprint, o.queue, o.owner, o.status AS old_status, o.failed_at
        FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status IS DISTINCT FROM n.status)
    UPDATE failure_groups b SET
        first_failed_at = (SELECT m.failed_at FROM messages m
            WHERE m.queue = b.queue AND m.status = b.status AND m.fingerprint = b.fingerprint AND m.owner = b.owner
            ORDER BY m.failed_at, m.id LIMIT 1),
        (last_failed_at, example_id) = (SELECT m.failed_at, m.id FROM messages m
            WHERE m.queue = b.queue AND m.status = b.status AND m.fingerprint = b.fingerprint AND m.owner = b.owner
            ORDER BY m.failed_at DESC, m.id DESC LIMIT 1)
    FROM (SELECT DISTINCT x.fingerprint, x.queue, x.owner, x.old_status AS status FROM moved x
        JOIN failure_groups c ON c.fingerprint = x.fingerprint AND c.queue = x.queue AND c.owner = x.owner AND c.status = x.old_status
        WHERE c.n > 0 AND (x.failed_at <= c.first_failed_at OR x.failed_at >= c.last_failed_at OR x.id = c.example_id)) s
    WHERE b.fingerprint = s.fingerprint AND b.queue = s.queue AND b.owner = s.owner AND b.status = s.status;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_counts_update AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION messages_counts_update();

-- quarantine_recount rebuilds failure_groups from messages: for rows written
-- outside the store (a bulk load, a restore), and once here for the
-- messages of an upgrade from 0001.
CREATE FUNCTION quarantine_recount() RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    DELETE FROM failure_groups;
    INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name, failure_class, reason,
        n, first_failed_at, last_failed_at, example_id)
    SELECT fingerprint, queue, owner, status, min(job_name), min(failure_class), min(reason), count(*),
        min(failed_at), max(failed_at),
        substr(max(to_char(failed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || id COLLATE "C"), 21)
    FROM messages GROUP BY 1, 2, 3, 4;
$$;

SELECT quarantine_recount();
