-- 0022_covered_counts_cheaper_pins: counts of a source without reading
-- the table, and pins that write only their items.

-- The kept counts of failure_groups do not hold the source (a collector's
-- name), so a count of messages filtered by source (the message list's
-- "N matching", the bulk selection's count, a replay form's) grouped the
-- matching rows of messages: a parallel sequential scan of the table
-- (162 ms at 1M for a job name and a source). The unique index of the
-- dedupe key, which begins with the source, now also carries the other
-- fields a count filters or groups by, so such a count reads that index
-- only (an index-only scan of the source's entries).
--
-- No index is added: every status change already writes an entry in this
-- index (the status is indexed elsewhere, so no update of a status is
-- HOT); its entries only grow (figures in docs/postgresql.md).
CREATE UNIQUE INDEX messages_source_dedupe_key_cover ON messages (source, dedupe_key)
    INCLUDE (queue, status, owner, job_name, failure_class);
ALTER TABLE messages DROP CONSTRAINT messages_source_dedupe_key_key,
    ADD CONSTRAINT messages_source_dedupe_key_key UNIQUE USING INDEX messages_source_dedupe_key_cover;

-- A pin copies its items into replay_items, a million for a million
-- messages; the foreign key to replay_batches checked each one (a query
-- and a row lock per item: 35 to 40 % of the insert's time). Items are
-- only ever written in a transaction that has just written their batch's
-- row (InsertBatch, or SavePin, which locks it and checks it is still
-- pinning), and removed with it (DeleteBatch, in the same order); no
-- batch is removed otherwise.
ALTER TABLE replay_items DROP CONSTRAINT replay_items_batch_id_fkey;
