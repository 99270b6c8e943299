-- 0008: the overview's kept counts. Hourly inflow counts, so that the
-- 24-hour inflow sparklines read a few rows per queue instead of counting
-- the day's messages; and the sampled age of each queue's oldest dead
-- letter, so that the age chart is a history. Times are microseconds
-- since the epoch.

-- Messages collected per queue and owner in each hour: the row of hour h
-- counts the messages with h < collected_at <= h + 1 hour (the windows of
-- Histogram are closed on the right), that is hour = the start of the
-- hour of collected_at - 1 µs. InsertBatch folds each batch in
-- (inflow.go). collected_at, queue and owner of a message never change,
-- and messages are never deleted.
CREATE TABLE inflow_hours (
    queue TEXT    NOT NULL,
    owner TEXT    NOT NULL,
    hour  INTEGER NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, hour, owner)
) WITHOUT ROWID;

INSERT INTO inflow_hours (queue, owner, hour, n)
SELECT queue, owner, (collected_at - 1) / 3600000000 * 3600000000, count(*)
FROM messages GROUP BY 1, 2, 3;

-- One row per sampled minute (SampleAges): its key makes a second sample
-- of the same minute write nothing.
CREATE TABLE age_sample_runs (
    minute     INTEGER NOT NULL PRIMARY KEY,
    sampled_at INTEGER NOT NULL
);

-- The samples: per queue and owner with quarantined messages, the
-- failed_at of the oldest and their number at sampled_at.
CREATE TABLE age_samples (
    sampled_at       INTEGER NOT NULL,
    queue            TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    oldest_failed_at INTEGER NOT NULL,
    waiting          INTEGER NOT NULL,
    PRIMARY KEY (sampled_at, queue, owner)
) WITHOUT ROWID;
