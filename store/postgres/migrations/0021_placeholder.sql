-- 0021: a placeholder for the migration of another branch (h-once), so
-- that 0022 loads in this branch (migrations are numbered without a gap).
-- Drop this file when that branch's 0021 is merged; renumber 0022 to 0021
-- if that branch brings none.
SELECT 1;
