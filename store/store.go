// Package store defines the contract every quarantine store fulfils.
// Package store/open picks the implementation a database URL names (it is
// the one package that links both drivers).
//
// Two implementations exist: store/sqlite (embedded, the default) and
// store/postgres (production). Both pass the conformance suite in
// store/storetest. Exported methods own their transaction; a state change
// and the audit event recording it are written in the same transaction.
package store

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Store is the quarantine's durable state.
//
// Errors are *quarantine.Error: ENOTFOUND for a missing row, EINVALID for
// bad input, ECONFLICT for a state that forbids the change, EUNAVAILABLE
// when the database cannot be reached, EINTERNAL otherwise. No method
// returns (nil, nil) for "not found".
type Store interface {
	Replays
	Discards
	Alarms
	AgeHistory
	Sessions
	MessageReplays
	Search

	// InsertBatch stores msgs in one transaction, in order. Each message is
	// normalised first (msg.Normalize with the store's clock), which fills
	// ID, hash, status and the like in place. (Source, DedupeKey) is unique:
	// a message whose key is already stored, by an earlier call, a
	// concurrent one or earlier in the same batch, is not stored again and
	// its result has New=false and the stored message's ID. A message with
	// an empty DedupeKey gets the SHA-256 of its payload as key. Version 1
	// of each new payload is recorded as a payload version. Either every
	// message of the batch is committed, or none is and an error returns.
	//
	// Re-failure link: a new message whose non-empty idempotency key equals
	// that of a stored message in status replayed (or one a replay item
	// holds in flight, quarantined or replaying: it came back before its
	// publish was recorded) marks that message
	// refailed and records its ID in the new message's RefailOf, in the same
	// transaction (the most recently failed one, if several), and marks
	// the latest published or deduplicated replay item of that message
	// refailed with RefailID the new message's ID (a pending item notes
	// RefailID, and becomes refailed when its publish is recorded).
	InsertBatch(ctx context.Context, msgs []*quarantine.Message) ([]quarantine.InsertResult, error)

	// GetMessage returns one message with its current payload, or ENOTFOUND.
	GetMessage(ctx context.Context, id string) (*quarantine.Message, error)

	// MessageOwners returns the owner of each of ids that names a stored
	// message, in one query and without payloads (a bulk action checks a
	// token's owners with it); ids that name no message are absent.
	// Errors: EUNAVAILABLE, EINTERNAL.
	MessageOwners(ctx context.Context, ids []string) (map[string]string, error)

	// ListMessages returns one page of the messages matching f, newest
	// first by (failed_at, id), starting after f.After. Payload bytes are
	// not loaded (Payload is nil; PayloadSize is set). f is validated
	// first (EINVALID naming the field).
	ListMessages(ctx context.Context, f quarantine.Filter) (quarantine.MessagePage, error)

	// CountByQueue returns, for every queue with messages matching f (its
	// cursor and limit ignored), the number of messages in each status.
	// Statuses with no message are omitted. Ordered by queue, then status.
	CountByQueue(ctx context.Context, f quarantine.Filter) ([]quarantine.QueueCount, error)

	// OldestQuarantined returns, for each queue that has quarantined
	// messages, the one with the earliest failed_at (ties: smallest id).
	// Ordered by queue.
	OldestQuarantined(ctx context.Context) ([]quarantine.QueueOldest, error)

	// PayloadVersions returns every payload the message held, oldest first,
	// without the payload bytes; ENOTFOUND if the message does not exist.
	PayloadVersions(ctx context.Context, messageID string) ([]quarantine.PayloadVersion, error)

	// PayloadVersion returns one version with its bytes, or ENOTFOUND.
	PayloadVersion(ctx context.Context, messageID string, version int) (*quarantine.PayloadVersion, error)

	// EditPayload stores e.Payload as the message's next payload version,
	// recording actor, reason and the old and new SHA-256, and appends a
	// message.edit audit event (details: version, old_sha256, new_sha256,
	// reason) in the same transaction. ENOTFOUND for an unknown message;
	// EPRECONDITION when e.IfMatch is not the current payload_sha256;
	// ECONFLICT while the message is replaying or a replay item holds it
	// in flight (leased, its outcome not yet recorded), or once it is
	// discarded.
	// The idempotency key never changes. Returns the updated message.
	EditPayload(ctx context.Context, e quarantine.PayloadEdit) (*quarantine.Message, error)

	// Discard marks the selected messages discarded (nothing is deleted),
	// one message.discard audit event each (details: reason, previous
	// status), all in one transaction. A filter may match at most
	// quarantine.MaxBulk messages (EUNPROCESSABLE above, naming the count);
	// with d.ExpectCount set, another count is ECONFLICT and nothing
	// changes. Messages whose status cannot become discarded, or that a
	// replay item holds in flight, are skipped (with a
	// message.discard_refused event); unknown IDs are skipped with reason
	// "not found".
	Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error)

	// RekeyMessages applies the key changes of r whose message still has
	// the old key and rule (the others are stale): key, key rule, the
	// missing_idempotency_key flag dropped, and one message.rekey audit
	// event each (details: old_key, new_key, old_rule, new_rule, reason),
	// all in one transaction. It returns the ids changed. EUNPROCESSABLE
	// without a reason; EINVALID for a change removing a key.
	RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error)

	// Sample returns a random sample of the messages matching r.Filter,
	// without payload bytes. Uniform: every matching message is equally
	// likely to be in it; reproducible: the same seed over the same set
	// gives the same sample. It must not sort the whole set by a random
	// value; see the implementations for how each stays fast on millions.
	Sample(ctx context.Context, r quarantine.SampleRequest) ([]*quarantine.Message, error)

	// Groups returns the failure groups (by fingerprint) of the messages
	// matching f (its cursor ignored; f.Limit caps the groups), largest
	// first (ties: most recent last_failed_at).
	Groups(ctx context.Context, f quarantine.Filter) ([]quarantine.Group, error)

	// QueueStats returns, for each queue with messages matching f (cursor
	// and limit ignored), the counts by status, the oldest quarantined
	// message, and the inflow (collected_at) in the last 5 minutes, hour
	// and day up to the end of the minute holding now: (end-5m, end],
	// (end-1h, end], (end-24h, end], end = now rounded up to a whole
	// minute (a window of whole minutes is read from the kept per-minute
	// and hourly counts, whatever the inflow). Every message counts,
	// whatever its status (discarded, replayed, purged of its payload):
	// inflow is what was collected. Owner is left empty (the API fills it
	// from the owner rules). Ordered by queue.
	QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error)

	// Histogram counts, for each of r.Queues in the order given, the
	// messages of r.Kind in each bucket of r.Edges (see
	// quarantine.HistogramRequest); a queue without any has zeros. Read in
	// one snapshot. The inflow reads the kept hourly counts and, within
	// the last day, per-minute counts for whole hours and minutes, and
	// counts the messages of the rest ((queue, collected_at)): on whole
	// minutes of the last day, its cost does not grow with the inflow.
	// The waiting ones read the kept per-minute counts of quarantined
	// messages by failed_at for whole minutes and count the rest ((queue,
	// status, failed_at)): on whole minutes, the cost does not grow with
	// how many wait. EINVALID naming the field.
	Histogram(ctx context.Context, r quarantine.HistogramRequest) ([]quarantine.QueueHistogram, error)

	// PurgePayloads removes the payload bytes (of every version) of up to
	// limit messages in status st whose updated_at is before before,
	// keeping their hashes and sizes, flags them payload_purged, and
	// appends one retention.purge audit event listing the ids, in one
	// transaction. Messages already purged are not selected again.
	PurgePayloads(ctx context.Context, st quarantine.Status, before time.Time, limit int, actor string) (quarantine.PurgeResult, error)

	// AppendAudit seals e as the next event of the chain and stores it.
	// For actions that change nothing else (a denied request, say); a
	// method that changes state appends its own event in its transaction.
	AppendAudit(ctx context.Context, e quarantine.AuditEvent) (quarantine.AuditEvent, error)

	// ListAudit returns events matching f, oldest first (by seq).
	ListAudit(ctx context.Context, f quarantine.AuditFilter) ([]quarantine.AuditEvent, error)

	// AuditHead returns the head the store keeps beside the log, updated in
	// the transaction of each append (EmptyHead for an empty log).
	AuditHead(ctx context.Context) (quarantine.AuditHead, error)

	// VerifyAudit walks the whole chain in seq order through a
	// quarantine.ChainVerifier that must end exactly at the head the store
	// keeps (v.EndAt(head)) and contain each of expect (heads reported
	// earlier). A broken chain is not an error: the result says where.
	VerifyAudit(ctx context.Context, expect ...quarantine.AuditHead) (quarantine.AuditVerification, error)

	// CreateToken stores t (ID and CreatedAt are filled) and appends a
	// token.create event by actor in the same transaction. t.SecretHash
	// must be set. A second active token with the same name is ECONFLICT.
	CreateToken(ctx context.Context, t *quarantine.Token, actor string) error

	// TokenBySecretHash returns the token with that secret hash, revoked or
	// not, or ENOTFOUND.
	TokenBySecretHash(ctx context.Context, hash string) (*quarantine.Token, error)

	// ListTokens returns every token, revoked ones included, by creation.
	ListTokens(ctx context.Context) ([]*quarantine.Token, error)

	// RevokeToken revokes the token and appends token.revoke by actor in the
	// same transaction. ENOTFOUND if there is no such token; revoking a
	// revoked token is ECONFLICT.
	RevokeToken(ctx context.Context, id, actor string) error

	// CountActiveTokens returns how many tokens are not revoked.
	CountActiveTokens(ctx context.Context) (int, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// Migrate applies the embedded migrations that are not applied yet.
	Migrate(ctx context.Context) error

	// SchemaVersion returns the applied and the latest migration numbers.
	SchemaVersion(ctx context.Context) (current, latest int, err error)
	// ContractsAbove returns the contract migrations (files with a
	// "-- contract:" line) applied above version, in order: none means a
	// binary whose latest migration is version can serve on the schema.
	ContractsAbove(ctx context.Context, version int) ([]int, error)

	// Close releases the connections.
	Close() error
}

// Replays is the durable state of replay batches. The replay engine uses
// the part it declares in package replay (replay.Store); the API the rest.
// Every state change appends its audit event in its own transaction.
type Replays interface {
	// CreateReplay pins the messages r selects (IDs in the order given, a
	// filter in id order, every match: no cap) as the items of a new
	// batch, through r.PlanItems with keyRule (may be nil). The selection
	// is read in one snapshot, exactly what matched when the pin began; a
	// selection larger than one chunk is written chunk by chunk, each in
	// a short transaction, in the pinning state (r.OnPinning is told
	// once it is there), then settled. Owners, when set, hide other
	// owners' messages (a filter is narrowed to them; an ID of another
	// owner is "not found"). With r.DryRun the batch is a draft expiring
	// after r.DraftTTL; otherwise it starts at once. No message changes
	// status, nor does the lease of its item: the item holds its message
	// in flight, and the record of its outcome moves the message once. Appends
	// replay.create (details: reason, dry_run, total, skipped,
	// destination, rate, and the force flags given) in the transaction
	// that settles the batch, and replay.start too when it started.
	// With r.StartAt the batch is scheduled once pinned (state scheduled,
	// StartAt set, the incident guard not checked yet: the start checks
	// it), and replay.create names start_at; EUNPROCESSABLE naming
	// start_at when it is not in the future or too far ahead
	// (quarantine.ReplayRequest.CheckStartAt). ECONFLICT when ExpectCount
	// does not hold, EUNPROCESSABLE naming expect_count without it above
	// r.ConfirmAbove (not a dry run).
	// Returns the batch with its counts.
	CreateReplay(ctx context.Context, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (*quarantine.ReplayBatch, error)

	// GetReplay returns one batch with its counts, or ENOTFOUND.
	GetReplay(ctx context.Context, id string) (*quarantine.ReplayBatch, error)

	// ListReplays returns batches matching f, newest first, and the id to
	// pass as After for the next page ("" on the last page).
	ListReplays(ctx context.Context, f quarantine.ReplayFilter) ([]*quarantine.ReplayBatch, string, error)

	// ListReplayItems returns items of one batch in Seq order after
	// f.After, and whether more follow. ENOTFOUND for an unknown batch.
	ListReplayItems(ctx context.Context, f quarantine.ReplayItemFilter) ([]quarantine.ReplayItem, bool, error)

	// ChangeReplay applies c.Action (quarantine.ReplayTransition decides
	// whether the batch's state allows it: ECONFLICT otherwise) and
	// appends its audit event (details: reason, from, to), in one
	// transaction. The batch's StateReason becomes c.Reason.
	//   start: each pending item whose message is no longer quarantined is
	//     skipped (quarantine.StartSkipReason); no message changes. A
	//     draft past its expiry is ECONFLICT (and expires).
	//     A scheduled batch starts as a draft does (before its StartAt
	//     too: an operator's start now).
	//   cancel: pending items are skipped ("cancelled"), which ends their
	//     hold on their messages; messages an older version moved to
	//     replaying become quarantined again. An item whose lease is live
	//     keeps it: a publish its engine records afterwards is recorded
	//     (the message was published), a failure is refused as stale; an
	//     expired lease's result is refused.
	//   pause, resume, halt: the state only; items leased before still
	//     hold their messages.
	//   complete: only when no item is pending (ECONFLICT otherwise).
	//   expire: a draft only.
	ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error)

	// RunnableReplays returns every batch in state running, oldest first,
	// every draft whose expiry is before now (so that the engine expires
	// them) and every scheduled batch whose StartAt is at or before now
	// (so that the engine starts them), without their counts (Counts nil:
	// GetReplay has them).
	RunnableReplays(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error)

	// LeaseReplayItems leases up to n items of a running batch to owner
	// until now+ttl, in Seq order, only items with Seq < maxSeq when
	// maxSeq > 0 (the canary): pending items not leased, or whose lease
	// expired. Each lease increments the item's fence and attempts; the
	// message comes with its current payload (latest version). A batch
	// that is not running gives no items (and no error). On PostgreSQL
	// concurrent engines never get the same item (FOR UPDATE SKIP LOCKED).
	LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error)

	// ReleaseReplayItems gives leased items back (pending, not leased)
	// when their fence still matches, for a publish that did not happen
	// (broker down, shutdown, pause). Others are ignored.
	ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error

	// RecordReplayResults records the outcome of leased items, in one
	// transaction. A result whose fence is not the item's current one (its
	// lease was taken over, or the batch was cancelled) is not recorded:
	// its index is returned in stale. published/deduplicated: the message
	// becomes replayed and its replay_count grows by one; failed/skipped:
	// the message becomes quarantined again. When no item of the batch is
	// pending afterwards, the batch completes (replay.complete by system).
	RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) (stale []int, err error)

	// SetReplayCanary records the canary's verdict and, for observing,
	// until when it observes; a no-op returning the batch when the verdict
	// is already verdict.
	SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error)

	// HoldReplayTokens empties the bucket key and keeps it from refilling
	// before until (a later hold wins; an earlier one changes nothing), so
	// that every engine sharing the database waits when a destination
	// asked for it (429 with Retry-After). A bucket not seen yet is made
	// empty.
	HoldReplayTokens(ctx context.Context, key string, until time.Time) error

	// CountReplays returns the number of batches in each state, every
	// state present (zero included), for the metrics.
	CountReplays(ctx context.Context) (map[quarantine.ReplayState]int, error)

	// TakeReplayTokens takes up to want tokens from every bucket at once
	// (the same number from each: the smallest available), refilling each
	// at its rate up to its burst since it was last taken from, in one
	// transaction, so that engines sharing the database share the budget.
	// A bucket seen for the first time starts full. Returns the number
	// taken and, when 0, how long until one token is available.
	TakeReplayTokens(ctx context.Context, buckets []quarantine.RateBucket, want int) (int, time.Duration, error)

	// LeaseReplayItemsWithin leases like LeaseReplayItems, but no more
	// items than every one of buckets grants publish slots for (one slot
	// per item, never closer than 1/rate on any bucket, however many
	// engines share the database), taken in the same transaction: the
	// first slot at least lead after now, every one at most ahead after
	// now. It returns the first slot: the k-th item leased must not be
	// published before slotTime(first, r, k), r the lowest rate of
	// buckets. With no slot free it leases nothing and returns how long
	// until there is one.
	LeaseReplayItemsWithin(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int, buckets []quarantine.RateBucket, lead, ahead time.Duration) (leases []quarantine.ReplayLease, first time.Time, wait time.Duration, err error)

	// TakeReplaySlots takes up to want slots of the same schedule, as a
	// lease does: how many, and the first (or how long until one is free).
	TakeReplaySlots(ctx context.Context, buckets []quarantine.RateBucket, want int, lead, ahead time.Duration) (n int, first time.Time, wait time.Duration, err error)
}

// Alarms is the durable state of the age alarms: one state row per alarm
// and queue, and the outbox of notifications owed to receivers. A state
// change and the notifications it owes are written in one transaction, so
// that a restart or a failover neither forgets one nor sends it twice.
type Alarms interface {
	// AlarmStates returns every stored state, ordered by alarm, then queue.
	AlarmStates(ctx context.Context) ([]quarantine.AlarmState, error)

	// SaveAlarms upserts states (keyed by alarm and queue; UpdatedAt is
	// set to the store's clock) and appends notes to the outbox (ID,
	// CreatedAt and Delivery pending are filled, NextAttemptAt defaults to
	// now; Attempts start at 0), all in one transaction.
	SaveAlarms(ctx context.Context, states []quarantine.AlarmState, notes []quarantine.AlarmNotification) error

	// PendingAlarmNotifications returns up to limit notifications still
	// pending (neither delivered nor failed), by ID (the order they were
	// queued), whatever their next attempt time.
	PendingAlarmNotifications(ctx context.Context, limit int) ([]quarantine.AlarmNotification, error)

	// RecordAlarmDelivery records one attempt at notification id: its
	// attempts grow by one; delivered, failed for good (GiveUp), or
	// pending again until a.Next, with a.Err kept. ENOTFOUND for an
	// unknown id, ECONFLICT when it is no longer pending.
	RecordAlarmDelivery(ctx context.Context, id int64, a quarantine.AlarmAttempt) error

	// PurgeAlarmNotifications deletes the delivered and failed
	// notifications queued before before (pending ones are kept, however
	// old) and returns how many it deleted.
	PurgeAlarmNotifications(ctx context.Context, before time.Time) (int64, error)

	// LockAlarms makes the caller the one alarm evaluator of the database
	// until it releases the lock (on PostgreSQL a session advisory lock,
	// scoped to the schema, held on a dedicated connection; on SQLite a
	// lock in the process). ECONFLICT while another holds it.
	LockAlarms(ctx context.Context) (quarantine.AlarmLock, error)
}

// AgeHistory is the sampled age of each queue's oldest quarantined
// message over time (the overview's chart of dead-letter age), kept by
// quarter of an hour (quarantine.AgeHistoryStep).
type AgeHistory interface {
	// SampleAges samples, for each queue and owner with quarantined
	// messages, the age at now of the oldest and their number, and folds
	// them into the step holding now (the largest of its samples, per
	// queue and owner and per queue over its owners), unless the minute
	// of now is already sampled: at most one sample a minute, however
	// many instances call it. The counts are the kept ones (no scan of
	// messages). Errors: EUNAVAILABLE, EINTERNAL.
	SampleAges(ctx context.Context, now time.Time) (quarantine.AgeSampleResult, error)

	// AgeHistory returns the steps of r, by step and queue (see
	// quarantine.AgeHistoryRequest). EINVALID naming the field.
	AgeHistory(ctx context.Context, r quarantine.AgeHistoryRequest) (quarantine.AgeHistory, error)

	// PruneAgeSamples deletes the steps before the one holding before,
	// and the sampled minutes before before, and returns how many
	// sampled minutes it deleted.
	PruneAgeSamples(ctx context.Context, before time.Time) (int64, error)
}

// Sessions is the durable state of the web UI's sign-ins: every instance
// on the database shares them, and they survive a restart. Only the
// SHA-256 of a session id is stored. Times come from the store's clock.
type Sessions interface {
	// CreateSession stores s (s.Validate first: EINVALID), setting
	// CreatedAt to now, ExpiresAt to now+max and IdleUntil to now+idle
	// (at most ExpiresAt). ECONFLICT when the id hash is taken.
	// Errors also: EUNAVAILABLE, EINTERNAL.
	CreateSession(ctx context.Context, s *quarantine.Session, idle, max time.Duration) error

	// UseSession returns the session of idHash and records its use: its
	// IdleUntil becomes now+idle (at most its ExpiresAt) when that moves
	// it by quarantine.SessionRefresh or more. ENOTFOUND when there is no
	// such session or it has ended at now (Session.Ended); an ended one is
	// deleted. Errors also: EUNAVAILABLE, EINTERNAL.
	UseSession(ctx context.Context, idHash string, idle time.Duration) (*quarantine.Session, error)

	// DeleteSession ends the session of idHash at once, for every
	// instance. Deleting a session that does not exist is not an error
	// (a second logout). Errors: EUNAVAILABLE, EINTERNAL.
	DeleteSession(ctx context.Context, idHash string) error

	// PurgeSessions deletes every session that has ended at now and
	// returns how many. Errors: EUNAVAILABLE, EINTERNAL.
	PurgeSessions(ctx context.Context) (int64, error)
}
