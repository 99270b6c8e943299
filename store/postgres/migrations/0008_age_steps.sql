-- 0008_age_steps: the age history by quarter of an hour. Reading a day
-- of per-minute samples (0006's age_samples) cost the overview 17 to
-- 46 ms of aggregation; each sample now folds into the row of its
-- quarter of an hour, so that a day is 96 rows per queue.

DROP TABLE age_samples;

-- Samples taken per quarter of an hour [step, step + 15 min): a step
-- without a row was not sampled (as opposed to sampled while nothing
-- waited).
CREATE TABLE age_steps (
    step    timestamptz PRIMARY KEY,
    samples integer NOT NULL
);

INSERT INTO age_steps (step, samples)
SELECT to_timestamp(floor(extract(epoch FROM minute) / 900) * 900), count(*)
FROM age_sample_runs GROUP BY 1;

-- The largest age of the oldest quarantined message (µs) and the largest
-- number waiting among a step's samples, per queue and owner, and per
-- queue over all its owners (all_owners, owner ''). SampleAges folds each
-- sample in, rows in key order.
CREATE TABLE age_step_queues (
    step       timestamptz NOT NULL,
    all_owners boolean NOT NULL,
    queue      text COLLATE "C" NOT NULL,
    owner      text COLLATE "C" NOT NULL,
    age_us     bigint NOT NULL,
    waiting    bigint NOT NULL,
    PRIMARY KEY (step, all_owners, queue, owner) INCLUDE (age_us, waiting)
);
