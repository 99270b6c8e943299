-- 0014: a replay item counts the times its destination refused it for now
-- (a broker's nack, a full queue, throttling). The engine retries such an
-- item, backing off, and fails it once its publish attempts are spent;
-- while it is pending, its reason is the last refusal.
ALTER TABLE replay_items ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;
