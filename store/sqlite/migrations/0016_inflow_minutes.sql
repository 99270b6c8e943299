-- 0016: inflow counts per minute, beside the hourly ones of 0008, so
-- that the 5-minute, 1-hour and 24-hour inflow of a queue (QueueStats)
-- and the parts of the overview's sparklines shorter than an hour read at
-- most a few hundred rows per queue instead of counting the messages
-- collected meanwhile (a million in an incident's hour).
--
-- The row of minute m counts the messages with m < collected_at <= m + 1
-- minute (microseconds since the epoch). InsertBatch folds each batch in
-- (inflow.go). Rows are kept for 25 hours (the age sampler's hourly prune
-- deletes older ones, PruneAgeSamples); reads use those of the last 24
-- hours (store/internal/hours).
CREATE TABLE inflow_minutes (
    queue  TEXT    NOT NULL,
    owner  TEXT    NOT NULL,
    minute INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, minute, owner)
) WITHOUT ROWID;

INSERT INTO inflow_minutes (queue, owner, minute, n)
SELECT queue, owner, (collected_at - 1) / 60000000 * 60000000, count(*)
FROM messages WHERE collected_at > (CAST(strftime('%s', 'now') AS INTEGER) - 90000) * 1000000
GROUP BY 1, 2, 3;
