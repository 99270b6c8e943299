-- 0012: messages_purge is partial on a column instead of a function.
--
-- 0002's condition, flags NOT LIKE '%"payload_purged"%', calls a
-- function, and a function may fail: SQLite then runs every INSERT of
-- several rows into messages under a statement journal (before the
-- statement changes a page of messages or of one of its indexes, it
-- copies the page there, in case the statement must be undone alone),
-- although no new message is in the index. InsertBatch writes 100
-- messages per INSERT. payload_purged is 1 exactly when flags hold
-- payload_purged: InsertBatch sets it from the flags, PurgePayloads
-- sets both.
ALTER TABLE messages ADD COLUMN payload_purged INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET payload_purged = 1 WHERE flags LIKE '%"payload_purged"%';
DROP INDEX messages_purge;
CREATE INDEX messages_purge ON messages (status, updated_at, id)
    WHERE status IN ('replayed', 'refailed', 'discarded') AND payload_purged = 0;
