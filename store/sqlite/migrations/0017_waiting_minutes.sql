-- 0017: the quarantined messages per queue, owner and minute of
-- failed_at, so that the overview's chart of how old the waiting dead
-- letters are reads at most a day of minutes per queue instead of
-- counting the last day's quarantined messages (a million in an
-- incident's hour).
--
-- The row of minute m counts the quarantined messages with m < failed_at
-- <= m + 1 minute (microseconds since the epoch). InsertBatch folds the
-- new quarantined messages in (inflow.go); the two triggers below move
-- the count of every status change into or out of quarantined, whoever
-- makes it (the replay's own moves included: they skip only the
-- failure-group trigger). queue, owner and failed_at of a message never
-- change, and messages are never deleted. Every minute is kept
-- (PruneAgeSamples deletes the empty ones).
CREATE TABLE waiting_minutes (
    queue  TEXT    NOT NULL,
    owner  TEXT    NOT NULL,
    minute INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, minute, owner)
) WITHOUT ROWID;

INSERT INTO waiting_minutes (queue, owner, minute, n)
SELECT queue, owner, (failed_at - 1) / 60000000 * 60000000, count(*)
FROM messages WHERE status = 'quarantined' GROUP BY 1, 2, 3;

CREATE TRIGGER messages_waiting_left AFTER UPDATE OF status ON messages
WHEN old.status = 'quarantined' AND new.status <> 'quarantined'
BEGIN
    UPDATE waiting_minutes SET n = n - 1
    WHERE queue = old.queue AND minute = (old.failed_at - 1) / 60000000 * 60000000 AND owner = old.owner;
END;

CREATE TRIGGER messages_waiting_joined AFTER UPDATE OF status ON messages
WHEN new.status = 'quarantined' AND old.status <> 'quarantined'
BEGIN
    INSERT INTO waiting_minutes (queue, owner, minute, n)
    VALUES (new.queue, new.owner, (new.failed_at - 1) / 60000000 * 60000000, 1)
    ON CONFLICT (queue, minute, owner) DO UPDATE SET n = n + 1;
END;
