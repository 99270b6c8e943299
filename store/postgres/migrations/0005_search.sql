-- 0005_search: an index for text search (Filter.Text, the API's q),
-- maintained off the ingest path.
--
-- search_docs holds one document per message: its reason, job name and
-- current payload text, case-folded by the store (store/internal/search),
-- under a pg_trgm GIN index that serves substring LIKE. Triggers only
-- queue the IDs of new or changed messages in search_pending (one narrow
-- row per message, no text); the store's background indexer folds and
-- indexes them, and a search first indexes what is still queued when the
-- queue is short, so that a search sees the writes before it.
--
-- pg_trgm was created by 0001, in schema public.

CREATE TABLE search_docs (
    message_id text COLLATE "C" PRIMARY KEY,
    failed_at  timestamptz NOT NULL,
    doc        text NOT NULL
);

CREATE INDEX search_docs_trgm_idx ON search_docs USING gin (doc public.gin_trgm_ops);

CREATE TABLE search_pending (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id text COLLATE "C" NOT NULL,
    queued_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- New messages: one statement-level trigger per insert statement, reading
-- only the IDs of the transition table.
CREATE FUNCTION search_queue_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (message_id) SELECT id FROM inserted;
    RETURN NULL;
END
$$;

CREATE TRIGGER search_queue_inserted AFTER INSERT ON messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION search_queue_inserted();

-- Changed text: an edit (payload_version), a new reason or job name, a
-- payload purged or rewritten in place. Status changes do not fire.
CREATE FUNCTION search_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'messages' THEN
        INSERT INTO search_pending (message_id) VALUES (NEW.id);
    ELSE
        INSERT INTO search_pending (message_id) VALUES (NEW.message_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER search_queue_message_changed AFTER UPDATE OF reason, job_name, payload_version ON messages
    FOR EACH ROW WHEN (OLD.reason IS DISTINCT FROM NEW.reason OR OLD.job_name IS DISTINCT FROM NEW.job_name
        OR OLD.payload_version IS DISTINCT FROM NEW.payload_version)
    EXECUTE FUNCTION search_queue_changed();

CREATE TRIGGER search_queue_payload_changed AFTER UPDATE OF payload_text, payload ON payload_versions
    FOR EACH ROW WHEN (OLD.payload_text IS DISTINCT FROM NEW.payload_text)
    EXECUTE FUNCTION search_queue_changed();

-- The messages stored before this migration.
INSERT INTO search_pending (message_id) SELECT id FROM messages ORDER BY failed_at DESC, id DESC;
