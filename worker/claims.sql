-- One terminal result per idempotency key (PostgreSQL and SQLite).
--
-- Complete is the only statement that writes a terminal result: it sets
-- state = 'done' and adds 1 to completions, and only from state 'held'
-- under the caller's owner token; 'done' is never left. So a key has had
-- exactly one terminal result when done, none otherwise. Every row this
-- query returns breaks that invariant; an empty result proves it.
SELECT key, state, completions
FROM worker_claims
WHERE completions > 1
   OR (state = 'done' AND completions <> 1)
   OR (state <> 'done' AND completions <> 0)
ORDER BY key;
