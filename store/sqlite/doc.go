// Package sqlite is the embedded quarantine store: a single SQLite file in
// WAL mode through modernc.org/sqlite (pure Go, no cgo).
//
// SQLite has one writer at a time, so the store keeps one write connection
// (transactions begin IMMEDIATE and queue in database/sql, never meeting
// SQLITE_BUSY among themselves) and a pool of read-only connections that
// read snapshots beside it. Migrations are embedded (migrations/*.sql) and
// applied by Migrate; Open does not migrate. The single writer is also
// what makes an edit's If-Match check and its write atomic, and a bulk
// discard's selection and change.
//
// Times are stored as INTEGER unix microseconds (UTC). Text search
// (Filter.Text, defined by package store/internal/search) reads
// case-folded documents under an FTS5 trigram index, kept by a background
// indexer off the ingest path (search.go, text.go, migration 0006).
//
// Counters: failure_groups (fingerprint, queue, owner, status -> count,
// first and last failed_at, latest failure) is folded in by InsertBatch
// and kept by a trigger on status changes (migration 0003), so Groups,
// CountByQueue, QueueStats and stratified samples read a few rows per
// group when the filter allows, and group the matching messages
// otherwise. inflow_hours (queue, hour, owner -> messages collected in
// that UTC hour) and inflow_minutes (the same per minute, the last 25
// hours: PruneAgeSamples deletes older rows) are folded in by InsertBatch
// as well (inflow.go): the inflow Histogram and QueueStats read their
// whole hours and minutes (migrations 0008, 0016), whatever the inflow.
// age_step_queues holds the largest age of the oldest quarantined message
// and waiting count per queue and owner (and per queue) in each quarter
// of an hour, sampled once a minute (age_history.go, migration 0010).
// Sample works as in the PostgreSQL store: exact for small
// sets, an arc of a random rank column for large ones (see
// store/internal/sampling), read from side tables the search indexer
// writes (sample_ranks, fingerprint_ranks: migration 0013) merged with
// the messages it has not taken yet (sample.go). The retention purge leaves an empty blob where
// the payload was (the schema keeps exactly one of the two payload columns
// set).
//
// Replays (replay.go, replay_change.go, replay_lease.go, bucket.go):
// batches, their items and the shared token buckets (migration 0004),
// each change in the one write transaction, which is also what keeps two
// leasers from taking the same item. Each lease bumps the item's fencing
// token, which a result must bring back.
package sqlite
