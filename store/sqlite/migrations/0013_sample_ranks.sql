-- 0013: the sampling indexes leave messages for side tables that the
-- search indexer writes (search.go, IndexSearch).
--
-- messages_sample (sample_rank, id) and messages_fingerprint_sample
-- (fingerprint, sample_rank, id) were written by every insert at a random
-- place: a commit of a batch of messages wrote about one page per message
-- to each of them (half of the ingest rate on SQLite). sample_ranks and
-- fingerprint_ranks hold the same keys, written by the indexer in large
-- batches sorted by rank, in the transaction that indexes the message for
-- search. A sample reads them merged with the messages still queued for
-- the index (search_pending), so it does not depend on how far the
-- indexer is (sample.go). Messages are never deleted, and their rank and
-- fingerprint never change: an entry, once written, stays true.
DROP INDEX messages_sample;
DROP INDEX messages_fingerprint_sample;

-- A list by fingerprint read messages_fingerprint_sample and sorted; it
-- now reads this one in list order. A failure group's messages fail in
-- about time order, so an insert writes near the end of its group: a
-- page per group a batch touches, not a page per message.
CREATE INDEX messages_fingerprint ON messages (fingerprint, failed_at, id);

CREATE TABLE sample_ranks (
    sample_rank INTEGER NOT NULL,
    id          TEXT    NOT NULL,
    PRIMARY KEY (sample_rank, id)
) WITHOUT ROWID;

CREATE TABLE fingerprint_ranks (
    fingerprint TEXT    NOT NULL,
    sample_rank INTEGER NOT NULL,
    id          TEXT    NOT NULL,
    PRIMARY KEY (fingerprint, sample_rank, id)
) WITHOUT ROWID;

-- A new message's entry in search_pending carries its rank, so that the
-- pending half of an arc reads the queue's narrow rows for ranks instead
-- of every queued message (an unfiltered sample took 0.3 s with 100,000
-- waiting, 0.03 s so). No index: one over the queue cost ingest a fifth
-- of its rate. Edits queue entries without a rank: their message is
-- ranked already, or its insert entry, ahead of theirs, is still queued.
ALTER TABLE search_pending ADD COLUMN sample_rank INTEGER;

-- Every message stored so far is ranked now (the entries already queued
-- have no rank).
INSERT INTO sample_ranks (sample_rank, id)
SELECT sample_rank, id FROM messages ORDER BY sample_rank, id;
INSERT INTO fingerprint_ranks (fingerprint, sample_rank, id)
SELECT fingerprint, sample_rank, id FROM messages ORDER BY fingerprint, sample_rank, id;
