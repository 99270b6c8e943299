-- 0006_overview: the overview's kept counts. Hourly inflow counts, so
-- that the 24-hour inflow sparklines read a few rows per queue instead of
-- counting the day's messages; and the sampled age of each queue's oldest
-- dead letter, so that the age chart is a history.

-- Messages collected per queue and owner in each hour: the row of hour h
-- counts the messages with h < collected_at <= h + 1 hour (the windows of
-- Histogram are closed on the right), that is hour =
-- date_trunc('hour', collected_at - 1 µs). InsertBatch folds each batch
-- in, in key order (the order every writer locks the rows in), in the
-- statement that inserts the messages; quarantine_recount rebuilds it.
-- collected_at, queue and owner of a message never change, and messages
-- are never deleted.
CREATE TABLE inflow_hours (
    queue text COLLATE "C" NOT NULL,
    owner text COLLATE "C" NOT NULL,
    hour  timestamptz NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, hour, owner)
);

INSERT INTO inflow_hours (queue, owner, hour, n)
SELECT queue, owner, date_trunc('hour', collected_at - interval '1 microsecond', 'UTC'), count(*)
FROM messages GROUP BY 1, 2, 3;

-- quarantine_recount rebuilds the kept counts (failure_groups and
-- inflow_hours) from messages, for rows written around InsertBatch.
CREATE OR REPLACE FUNCTION quarantine_recount() RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    DELETE FROM failure_groups;
    INSERT INTO failure_groups (fingerprint, queue, owner, status, job_name, failure_class, reason,
        n, first_failed_at, last_failed_at, example_id)
    SELECT fingerprint, queue, owner, status, min(job_name), min(failure_class), min(reason), count(*),
        min(failed_at), max(failed_at),
        substr(max(to_char(failed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || id COLLATE "C"), 21)
    FROM messages GROUP BY 1, 2, 3, 4;
    DELETE FROM inflow_hours;
    INSERT INTO inflow_hours (queue, owner, hour, n)
    SELECT queue, owner, date_trunc('hour', collected_at - interval '1 microsecond', 'UTC'), count(*)
    FROM messages GROUP BY 1, 2, 3;
$$;

-- One row per sampled minute (SampleAges): its key makes a second sample
-- of the same minute, by this or another instance, write nothing.
CREATE TABLE age_sample_runs (
    minute     timestamptz PRIMARY KEY,
    sampled_at timestamptz NOT NULL
);

-- The samples: per queue and owner with quarantined messages, the
-- failed_at of the oldest and their number at sampled_at. AgeHistory
-- reads a range of sampled_at from the primary key alone.
CREATE TABLE age_samples (
    sampled_at       timestamptz NOT NULL,
    queue            text COLLATE "C" NOT NULL,
    owner            text COLLATE "C" NOT NULL,
    oldest_failed_at timestamptz NOT NULL,
    waiting          bigint NOT NULL,
    PRIMARY KEY (sampled_at, queue, owner) INCLUDE (oldest_failed_at, waiting)
);
