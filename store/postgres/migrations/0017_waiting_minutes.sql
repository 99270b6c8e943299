-- 0017_waiting_minutes: the quarantined messages per queue, owner and
-- minute of failed_at, so that the overview's chart of how old the
-- waiting dead letters are reads at most a day of minutes per queue
-- instead of counting the last day's quarantined messages (a million in
-- an incident's hour).
--
-- The row of minute m counts the quarantined messages with m < failed_at
-- <= m + 1 minute. InsertBatch folds the new quarantined messages in,
-- after inflow_minutes, in key order; the statement trigger
-- messages_waiting_update moves the counts of every status change into
-- or out of quarantined, whoever makes it (it fires after
-- messages_counts_update: triggers fire in name order, so that every
-- writer locks failure_groups, then waiting_minutes). queue, owner and
-- failed_at of a message never change, and messages are never deleted.
-- Every minute is kept (PruneAgeSamples deletes the empty ones).
CREATE TABLE waiting_minutes (
    queue  text COLLATE "C" NOT NULL,
    owner  text COLLATE "C" NOT NULL,
    minute timestamptz NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, minute, owner)
);

INSERT INTO waiting_minutes (queue, owner, minute, n)
SELECT queue, owner, date_trunc('minute', failed_at - interval '1 microsecond', 'UTC'), count(*)
FROM messages WHERE status = 'quarantined' GROUP BY 1, 2, 3;

CREATE FUNCTION messages_waiting_update() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO waiting_minutes AS w (queue, owner, minute, n)
    SELECT queue, owner, minute, sum(d)::bigint FROM (
        SELECT o.queue, o.owner, date_trunc('minute', o.failed_at - interval '1 microsecond', 'UTC') AS minute,
            CASE WHEN n.status = 'quarantined' THEN 1 ELSE -1 END AS d
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE o.status IS DISTINCT FROM n.status AND (o.status = 'quarantined' OR n.status = 'quarantined')) x
    GROUP BY 1, 3, 2 HAVING sum(d) <> 0 ORDER BY 1, 3, 2
    ON CONFLICT (queue, minute, owner) DO UPDATE SET n = w.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_waiting_update AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION messages_waiting_update();

-- quarantine_recount rebuilds every kept count from messages (failure_groups,
-- inflow_hours, inflow_minutes, waiting_minutes), for rows written around
-- InsertBatch (a bulk load, a restore). The inflow minutes are those of
-- the 25 hours before the newest collected message.
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
    DELETE FROM waiting_minutes;
    INSERT INTO waiting_minutes (queue, owner, minute, n)
    SELECT queue, owner, date_trunc('minute', failed_at - interval '1 microsecond', 'UTC'), count(*)
    FROM messages WHERE status = 'quarantined' GROUP BY 1, 2, 3;
$$;
