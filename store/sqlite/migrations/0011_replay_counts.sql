-- 0011: the counts of a batch's items by outcome are kept, not grouped
-- from the items at every read of the batch (the engine reads its batch
-- every second, a page or a client following a batch every few: each
-- grouped every item of the batch through replay_items_outcome).
--
-- The batch's insert writes the counts of its items (store/sqlite
-- replay.go); every later change of an item's outcome, whoever makes it
-- (a result, a start's skip, a cancel, a re-failure), moves one from the
-- old outcome's count to the new one's in the same statement, through the
-- row trigger below. Items are never deleted. A count whose items all
-- moved on stays, at 0.

CREATE TABLE replay_counts (
    batch_id TEXT    NOT NULL,
    outcome  TEXT    NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (batch_id, outcome)
) WITHOUT ROWID;

INSERT INTO replay_counts (batch_id, outcome, n)
SELECT batch_id, outcome, count(*) FROM replay_items GROUP BY batch_id, outcome;

CREATE TRIGGER replay_items_outcome_moved AFTER UPDATE OF outcome ON replay_items
WHEN old.outcome <> new.outcome
BEGIN
    UPDATE replay_counts SET n = n - 1 WHERE batch_id = old.batch_id AND outcome = old.outcome;
    INSERT INTO replay_counts (batch_id, outcome, n) VALUES (new.batch_id, new.outcome, 1)
    ON CONFLICT (batch_id, outcome) DO UPDATE SET n = n + 1;
END;

-- Its one reader was the grouping of the counts; every result moved its
-- item's entry in it.
DROP INDEX replay_items_outcome;
