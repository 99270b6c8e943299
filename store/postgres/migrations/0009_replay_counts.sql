-- 0009_replay_counts: the counts of a batch's items by outcome are kept,
-- not grouped from the items at every read. While a batch runs, every
-- result leaves a dead version of its item behind, so grouping its items
-- visits up to every version of every item (and a page following a batch
-- reads it every few seconds).
--
-- The counts are deltas, appended by statement triggers in the transaction
-- of every insert of items and every change of an outcome (whoever makes
-- it: a result, a start, a cancel, a re-failure). Appends never wait for
-- each other, so the triggers take no lock another writer could hold; a
-- read sums a batch's rows (a few per chunk of results).

CREATE TABLE replay_counts (
    batch_id text COLLATE "C" NOT NULL REFERENCES replay_batches (id),
    outcome  text COLLATE "C" NOT NULL,
    n        bigint NOT NULL
);

CREATE INDEX replay_counts_batch_idx ON replay_counts (batch_id);

CREATE FUNCTION replay_counts_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO replay_counts (batch_id, outcome, n)
    SELECT batch_id, outcome, count(*) FROM new_rows GROUP BY 1, 2;
    RETURN NULL;
END
$$;

CREATE TRIGGER replay_counts_inserted AFTER INSERT ON replay_items
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION replay_counts_inserted();

-- An UPDATE trigger with transition tables cannot name its columns: it
-- runs after every UPDATE of items (a lease, a release too), and appends
-- only the outcomes that changed.
CREATE FUNCTION replay_counts_updated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO replay_counts (batch_id, outcome, n)
    SELECT batch_id, outcome, sum(d) FROM (
        SELECT n.batch_id, n.outcome, 1 AS d
        FROM old_rows o JOIN new_rows n ON n.batch_id = o.batch_id AND n.seq = o.seq
        WHERE o.outcome <> n.outcome
        UNION ALL
        SELECT o.batch_id, o.outcome, -1
        FROM old_rows o JOIN new_rows n ON n.batch_id = o.batch_id AND n.seq = o.seq
        WHERE o.outcome <> n.outcome) x
    GROUP BY 1, 2
    HAVING sum(d) <> 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER replay_counts_updated AFTER UPDATE ON replay_items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION replay_counts_updated();

INSERT INTO replay_counts (batch_id, outcome, n)
SELECT batch_id, outcome, count(*) FROM replay_items GROUP BY 1, 2;
