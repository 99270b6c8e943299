-- 0006: an index for text search (Filter.Text, the API's q), maintained
-- off the ingest path.
--
-- search_docs holds one document per message: its reason, job name and
-- current payload text, case-folded by the store (store/internal/search),
-- and search_fts indexes them with the FTS5 trigram tokenizer (the text
-- is folded already, so the tokenizer keeps case). detail=none keeps only
-- which documents hold each trigram, not where: it is written about half
-- again as fast, and a search looks up the trigrams of the text, then
-- tests the documents that hold them all.
-- Triggers only queue the IDs of new or changed messages in
-- search_pending; the store's background indexer folds and indexes them,
-- and a search first indexes what is still queued when the queue is short.

CREATE TABLE search_docs (
    docid      INTEGER PRIMARY KEY,
    message_id TEXT    NOT NULL UNIQUE,
    failed_at  INTEGER NOT NULL,
    doc        TEXT    NOT NULL
);

CREATE VIRTUAL TABLE search_fts USING fts5(
    doc, content='search_docs', content_rowid='docid', tokenize='trigram case_sensitive 1', detail=none);

CREATE TABLE search_pending (
    seq        INTEGER PRIMARY KEY,
    message_id TEXT    NOT NULL,
    queued_at  INTEGER NOT NULL
);

CREATE TRIGGER search_queue_inserted AFTER INSERT ON messages BEGIN
    INSERT INTO search_pending (message_id, queued_at)
    VALUES (new.id, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

-- Changed text: an edit (payload_version), a new reason or job name, a
-- payload purged. Status changes do not fire.
CREATE TRIGGER search_queue_message_changed AFTER UPDATE OF reason, job_name, payload_version ON messages
WHEN old.reason IS NOT new.reason OR old.job_name IS NOT new.job_name OR old.payload_version IS NOT new.payload_version
BEGIN
    INSERT INTO search_pending (message_id, queued_at)
    VALUES (new.id, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER search_queue_payload_changed AFTER UPDATE OF payload_text, payload ON payload_versions
WHEN old.payload_text IS NOT new.payload_text
BEGIN
    INSERT INTO search_pending (message_id, queued_at)
    VALUES (new.message_id, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

-- The messages stored before this migration.
INSERT INTO search_pending (message_id, queued_at)
SELECT id, CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM messages ORDER BY failed_at DESC, id DESC;
