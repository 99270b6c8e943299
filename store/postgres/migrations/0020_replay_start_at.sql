-- 0020_replay_start_at: a replay batch may be scheduled. start_at is when
-- an engine starts a batch in state 'scheduled' (kept once it started);
-- start_force says the request that scheduled it overrode the incident
-- guard (audited then), so that its start overrides it too.
-- RunnableReplays finds the scheduled batches due through
-- replay_batches_state_idx (a handful of scheduled batches at most).
ALTER TABLE replay_batches ADD COLUMN start_at timestamptz;
ALTER TABLE replay_batches ADD COLUMN start_force boolean NOT NULL DEFAULT false;
