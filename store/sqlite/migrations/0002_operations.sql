-- 0002: sampling, inflow, the re-failure link and the retention purge.
--
-- Sampling: a rank drawn uniformly from [0, 2^52) when a message is
-- stored (InsertBatch sets it; existing rows draw theirs here). A sample
-- is the arc of ranks after an offset the seed picks (sample.go).
ALTER TABLE messages ADD COLUMN sample_rank INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET sample_rank = random() & 4503599627370495;
CREATE INDEX messages_sample             ON messages (sample_rank, id);
CREATE INDEX messages_fingerprint_sample ON messages (fingerprint, sample_rank, id);

-- Inflow per queue by collection time.
CREATE INDEX messages_inflow ON messages (queue, collected_at);

-- The retention purge: terminal messages whose payload is still there.
CREATE INDEX messages_purge ON messages (status, updated_at, id)
    WHERE status IN ('replayed', 'refailed', 'discarded') AND flags NOT LIKE '%"payload_purged"%';
