-- 0010_replay_items_hot: a lease and a release of an item are HOT
-- updates.
--
-- A lease writes lease_owner, lease_expires_at, fence, attempts and
-- updated_at, none of them indexed, but items were written into full
-- pages: the new version of a leased item went to another page, with a
-- new entry in each of the items' indexes (four per item, a chunk of 500
-- at a time). Pages of new items keep 40% free for the lease's version on
-- the same page.
--
-- replay_items_outcome_idx is no longer read: a batch's counts are summed
-- from replay_counts (0009), and a result's outcome change no longer
-- writes an entry in it.
DROP INDEX replay_items_outcome_idx;
ALTER TABLE replay_items SET (fillfactor = 60);
