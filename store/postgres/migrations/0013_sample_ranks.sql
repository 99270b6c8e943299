-- 0013: the sampling indexes leave the ingest path.
--
-- messages_sample_idx (sample_rank, id) and messages_fingerprint_sample_idx
-- (fingerprint, sample_rank, id) were about half of an insert's WAL: a
-- random rank lands on a random leaf page, so every new message dirtied
-- one page of each, and after each checkpoint that page's first change
-- wrote a full-page image. The same entries now live in two narrow side
-- tables that the search indexer (search.go) writes, sorted by rank, for
-- the messages it takes from search_pending, in the transaction that takes
-- them: a message is in the side tables exactly when its insert entry is
-- no longer queued. The insert entry carries the message's rank, so a
-- sample reads the side table's arc and the queued messages whose rank is
-- in the arc, in one statement (one snapshot): the sample is the same
-- whether the indexer has caught up or not. Edits queue entries without
-- a rank (the message is already ranked, or its insert entry is still
-- queued). Messages are never deleted, so side rows never are either.

CREATE TABLE sample_ranks (
    sample_rank bigint NOT NULL,
    id          text COLLATE "C" NOT NULL,
    PRIMARY KEY (sample_rank, id)
);

CREATE TABLE fingerprint_ranks (
    fingerprint text COLLATE "C" NOT NULL,
    sample_rank bigint NOT NULL,
    id          text COLLATE "C" NOT NULL,
    PRIMARY KEY (fingerprint, sample_rank, id)
);

ALTER TABLE search_pending ADD COLUMN sample_rank bigint;
-- The queued messages in rank order. Random too, but over the queue only:
-- a few hundred hot pages, not one per thousand messages stored.
CREATE INDEX search_pending_rank_idx ON search_pending (sample_rank, message_id) WHERE sample_rank IS NOT NULL;

CREATE OR REPLACE FUNCTION search_queue_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (message_id, sample_rank) SELECT id, sample_rank FROM inserted;
    RETURN NULL;
END
$$;

-- Every message stored so far is ranked now; the entries already queued
-- have no rank, so a sample does not read them twice.
INSERT INTO sample_ranks (sample_rank, id) SELECT sample_rank, id FROM messages ORDER BY 1, 2;
INSERT INTO fingerprint_ranks (fingerprint, sample_rank, id) SELECT fingerprint, sample_rank, id FROM messages ORDER BY 1, 2, 3;

DROP INDEX messages_sample_idx;
DROP INDEX messages_fingerprint_sample_idx;
-- The dropped index was also the index of messages by fingerprint (lists
-- filtered by a failure group, the members of a stratified sample's
-- small groups). In failed_at order instead of rank order, a new message
-- goes to the last page of its group: one hot page per active group, not
-- a random one.
CREATE INDEX messages_fingerprint_idx ON messages (fingerprint, failed_at, id);
