-- 0010: the age history by quarter of an hour. Each sample folds into
-- the row of its quarter of an hour, so that a day of history is 96 rows
-- per queue instead of 1440 samples to aggregate.

DROP TABLE age_samples;

-- Samples taken per quarter of an hour [step, step + 15 min) (µs).
CREATE TABLE age_steps (
    step    INTEGER NOT NULL PRIMARY KEY,
    samples INTEGER NOT NULL
);

INSERT INTO age_steps (step, samples)
SELECT minute / 900000000 * 900000000, count(*) FROM age_sample_runs GROUP BY 1;

-- The largest age of the oldest quarantined message (µs) and the largest
-- number waiting among a step's samples, per queue and owner, and per
-- queue over all its owners (all_owners 1, owner '').
CREATE TABLE age_step_queues (
    step       INTEGER NOT NULL,
    all_owners INTEGER NOT NULL,
    queue      TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    age_us     INTEGER NOT NULL,
    waiting    INTEGER NOT NULL,
    PRIMARY KEY (step, all_owners, queue, owner)
) WITHOUT ROWID;
