-- 0020_replay_start_at: a replay batch may be scheduled. start_at (Unix
-- microseconds) is when an engine starts a batch in state 'scheduled'
-- (kept once it started); start_force says the request that scheduled it
-- overrode the incident guard (audited then), so that its start
-- overrides it too.
ALTER TABLE replay_batches ADD COLUMN start_at INTEGER;
ALTER TABLE replay_batches ADD COLUMN start_force INTEGER NOT NULL DEFAULT 0;
