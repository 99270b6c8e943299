-- 0021: the stores' own status moves count their waiting minutes
-- themselves, per minute, and the row triggers skip them.
--
-- A status change fired the failure-group trigger (0007, skipped when
-- status_moves.counted marks the UPDATE) and the two waiting-minute
-- triggers (0017, never skipped): a chunk of a discard of 2,000
-- quarantined messages ran 2,000 waiting-minute updates. The two
-- waiting-minute triggers are one now, skipped when status_moves.counted
-- is 2: the stores' own moves (store/sqlite/replay_groups.go: the
-- replay's and the discard's) set it to 2 and move the waiting minutes
-- per minute in one go, as they move the failure groups per group.
-- counted = 1 (the release before, during a roll) still skips only the
-- failure-group trigger, so its moves keep being counted here. Every
-- other status change is counted by the triggers, as before.
DROP TRIGGER messages_waiting_left;
DROP TRIGGER messages_waiting_joined;

CREATE TRIGGER messages_waiting_moved AFTER UPDATE OF status ON messages
WHEN old.status <> new.status AND (old.status = 'quarantined' OR new.status = 'quarantined')
    AND (SELECT counted FROM status_moves WHERE id = 1) < 2
BEGIN
    UPDATE waiting_minutes SET n = n - 1
    WHERE old.status = 'quarantined'
        AND queue = old.queue AND minute = (old.failed_at - 1) / 60000000 * 60000000 AND owner = old.owner;
    INSERT INTO waiting_minutes (queue, owner, minute, n)
    SELECT new.queue, new.owner, (new.failed_at - 1) / 60000000 * 60000000, 1 WHERE new.status = 'quarantined'
    ON CONFLICT (queue, minute, owner) DO UPDATE SET n = n + 1;
END;
