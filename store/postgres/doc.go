// Package postgres is the PostgreSQL implementation of store.Store, built
// on a pgx v5 connection pool (pool settings such as pool_max_conns may be
// given in the URL).
//
// Open connects; Migrate applies the embedded, numbered migrations in
// migrations/ (each in its own transaction, under an advisory lock, so
// that concurrent Migrate calls are safe). Every object is created
// unqualified, in the first schema of the connection's search_path: set
// it with the search_path runtime parameter of the URL to keep several
// installations (or tests) apart in one database. The first migration
// creates the pg_trgm extension in schema public, which needs the right
// to create (trusted) extensions in the database (the second drops the
// trigram indexes again: see text.go).
//
// The audit log is append-only: a trigger refuses UPDATE, DELETE and
// TRUNCATE on audit_log, and appends serialise on the row lock of
// audit_head, in the transaction of the change they record. Bulk actions
// append their events with one statement (appendAudits). Another trigger
// lets audit_head move only forward, to the log's last event (migration
// 0014). The owner of the tables could disable the triggers; serve can
// run as a runtime role that owns nothing, to which GrantRuntime gives
// every table's rows but only SELECT and INSERT on audit_log and UPDATE
// of the head (grants.go).
//
// InsertBatch stores a batch with one INSERT … SELECT FROM unnest(…) ON
// CONFLICT DO NOTHING, in (source, dedupe_key) order so that overlapping
// concurrent batches cannot deadlock; the same statement writes version 1
// of each payload and folds the batch into the counters (below). The
// re-failure link locks the replayed messages of the batch's idempotency
// keys first, in the same round trip (refail.go).
//
// Counters: failure_groups (fingerprint, queue, owner, status -> count,
// first and last failed_at, latest failure) is kept in the transaction of
// every insert (InsertBatch) and status change (a statement trigger,
// whoever changes the status), its rows always locked in key order.
// CountByQueue, OldestQuarantined, QueueStats, Groups and stratified
// samples read it when the filter allows, so their cost does not grow
// with the number of messages; other filters aggregate the matching
// messages. inflow_hours (queue, hour, owner -> messages collected in
// that UTC hour) is kept by InsertBatch too, after failure_groups, and
// inflow_minutes (the same per minute, the last 25 hours: PruneAgeSamples
// deletes older rows) after it; the inflow Histogram and QueueStats read
// their whole hours and minutes (migrations 0006, 0016), whatever the
// inflow.
// age_step_queues holds the largest age of the oldest quarantined message
// and waiting count per queue and owner (and per queue) in each quarter
// of an hour, sampled once a minute (age_history.go, migration 0008).
// quarantine_recount() rebuilds the counters
// after rows were written behind the store's back.
//
// Sample reads an arc of a random rank column (sample.go and package
// store/internal/sampling). Text search (Filter.Text, defined by package
// store/internal/search) reads case-folded documents under a pg_trgm GIN
// index, kept by a background indexer off the ingest path (search.go,
// text.go, migration 0005).
//
// Replays (replay.go, replay_change.go, replay_lease.go, bucket.go):
// batches, their items and the shared token buckets (migration 0003).
// Writers lock a batch row, then its items, then messages by id. Engines
// lease items with FOR UPDATE SKIP LOCKED, so concurrent engines never
// take the same item, and each lease bumps the item's fencing token,
// which a result must bring back. Token buckets are locked in key order.
//
// Driver errors are translated to *quarantine.Error in one place
// (errors.go).
package postgres
