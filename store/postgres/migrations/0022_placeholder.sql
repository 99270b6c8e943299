-- 0022: a placeholder for the migration of another branch, so that 0023
-- loads in this branch (migrations are numbered without a gap). Drop
-- this file when that branch's 0022 is merged; renumber 0023 to 0022 if
-- that branch brings none.
SELECT 1;
