-- 0016_inflow_minutes: inflow counts per minute, beside the hourly ones
-- of 0006, so that the 5-minute, 1-hour and 24-hour inflow of a queue
-- (QueueStats) and the parts of the overview's sparklines shorter than an
-- hour read at most a few hundred rows per queue instead of counting the
-- messages collected meanwhile (a million in an incident's hour).
--
-- The row of minute m counts the messages with m < collected_at <= m + 1
-- minute: minute = date_trunc('minute', collected_at - 1 µs). InsertBatch
-- folds each batch in, after inflow_hours, in key order, in the statement
-- that inserts the messages. Rows are kept for 25 hours (the age
-- sampler's hourly prune deletes older ones, PruneAgeSamples); reads use
-- those of the last 24 hours (store/internal/hours).
CREATE TABLE inflow_minutes (
    queue  text COLLATE "C" NOT NULL,
    owner  text COLLATE "C" NOT NULL,
    minute timestamptz NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, minute, owner)
);

INSERT INTO inflow_minutes (queue, owner, minute, n)
SELECT queue, owner, date_trunc('minute', collected_at - interval '1 microsecond', 'UTC'), count(*)
FROM messages WHERE collected_at > now() - interval '25 hours' GROUP BY 1, 2, 3;

-- quarantine_recount rebuilds the kept counts (failure_groups,
-- inflow_hours and inflow_minutes) from messages, for rows written around
-- InsertBatch (a bulk load, a restore). The minutes are those of the 25
-- hours before the newest collected message.
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
    DELETE FROM inflow_minutes;
    INSERT INTO inflow_minutes (queue, owner, minute, n)
    SELECT queue, owner, date_trunc('minute', collected_at - interval '1 microsecond', 'UTC'), count(*)
    FROM messages WHERE collected_at > (SELECT max(collected_at) FROM messages) - interval '25 hours'
    GROUP BY 1, 2, 3;
$$;
