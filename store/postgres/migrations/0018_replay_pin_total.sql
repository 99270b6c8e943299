-- 0018_replay_pin_total: how many items a batch holds once pinned, known when
-- its pin begins. A large selection is pinned chunk by chunk (state
-- pinning): total counts the items written so far and reaches pin_total
-- when the pin ends, which is the progress a client shows.
ALTER TABLE replay_batches ADD COLUMN pin_total integer NOT NULL DEFAULT 0;
UPDATE replay_batches SET pin_total = total;
