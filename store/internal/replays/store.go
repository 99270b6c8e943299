package replays

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Writer runs fn in one write transaction of a store (committed when fn
// returns nil); what names the work in its errors.
type Writer interface {
	Write(ctx context.Context, what string, fn func(Tx) error) error
}

// Reader is what the read methods of Methods need of a store: each read
// is a read transaction of its own (one snapshot).
type Reader interface {
	Writer
	// Batches reads up to limit batches f (valid) matches, newest first
	// (by id, below f.After when set), with their counts.
	Batches(ctx context.Context, f quarantine.ReplayFilter, limit int) ([]*quarantine.ReplayBatch, error)
	// StalePins returns the ids of the pinning batches not written to
	// since before.
	StalePins(ctx context.Context, before time.Time) ([]string, error)
	// Runnable reads the running batches, the drafts expired at now and
	// the scheduled batches due at now, oldest first, without counts.
	Runnable(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error)
	// Items reads up to limit items f (valid, its batch id a valid id)
	// matches, in seq order after f.After; found is false when there is
	// no such batch.
	Items(ctx context.Context, f quarantine.ReplayItemFilter, limit int) (items []quarantine.ReplayItem, found bool, err error)
	// MessageItems reads the replay items of message id (a valid id), one
	// per batch that held it, the latest limit batches (by batch id:
	// creation order), newest first.
	MessageItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error)
}

// LeaseRequest is a lease of LeaseReplayItemsWithin, checked
// (LeaseWithin).
type LeaseRequest struct {
	BatchID, Owner string
	N              int           // at most this many items
	TTL            time.Duration // the leases' length
	MaxSeq         int           // positive: only items below this seq
	// Buckets (validated, in key order) grant the publish slots of the
	// items (ReserveSlots with Lead and Ahead); none: every item is due
	// at once.
	Buckets     []quarantine.RateBucket
	Lead, Ahead time.Duration
}

// Leaser is what the lease methods of Methods need of a store.
type Leaser interface {
	// Lease leases the items of l in one write transaction when its
	// batch is running (none otherwise), skipping the items whose message
	// another batch holds (Claim); the messages' rows are not changed.
	// It returns the leases (an empty slice for none), their messages not
	// yet read, when they are due, and, when there is none for want of a
	// slot, how long until one is free.
	Lease(ctx context.Context, l LeaseRequest) ([]quarantine.ReplayLease, time.Time, time.Duration, error)
	// LeasedMessages sets the message of each lease, read after the
	// lease committed; EINTERNAL when one is missing.
	LeasedMessages(ctx context.Context, leases []quarantine.ReplayLease) error
	// ReleaseReplayItems gives leases back (store.Replays).
	ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error
}

// Backend is what Methods need of a store.
type Backend interface {
	Pinner
	Reader
	Leaser
}

// BatchColumns are replay_batches' columns (aliased b), in the order
// both stores read them, the observe window read by observe (as a count
// of microseconds).
func BatchColumns(observe string) string {
	return `b.id, b.state, b.state_reason, b.reason, b.actor, b.dest_queue, b.dest_collector,
	b.rate, b.burst, b.canary, ` + observe + `, b.halt_refail_ratio, b.force_without_key, b.queues, b.owners,
	b.total, b.pin_total, b.canary_verdict, b.canary_until, b.created_at, b.updated_at, b.started_at, b.finished_at,
	b.expires_at, b.start_at, b.start_force`
}

// ItemColumns are replay_items' columns (aliased i), in the order both
// stores read them.
const ItemColumns = `i.batch_id, i.seq, i.message_id, i.queue, i.outcome, i.reason, i.destination,
	i.idempotency_key, i.payload_version, i.payload_sha256, i.dropped_headers, i.attempts, i.refail_id,
	i.published_at, i.updated_at, i.refusals`

// Methods are the methods of store.Replays that both stores share apart
// from SQL, written once over a store's Backend. A store embeds them
// (through an unexported alias), so that they are its own methods.
type Methods struct {
	b     Backend
	clock func() time.Time
}

// NewMethods returns the Methods of a store over b; clock is the store's
// (UTC, to the microsecond).
func NewMethods(b Backend, clock func() time.Time) Methods { return Methods{b, clock} }

// CreateReplay pins the messages r selects as a new batch; see
// store.Replays and Pin: r is validated, the search index brought up to
// date for its text (Pinner.SearchReady), then the selection is read in
// one snapshot and its items written in short transactions beside it; no
// message changes status (a lease moves it). Errors: EINVALID for a bad
// request, ECONFLICT when r.ExpectCount does not hold, EUNPROCESSABLE
// (naming expect_count) when a batch started at once selects more than
// r.ConfirmAbove without it, EUNAVAILABLE, EINTERNAL.
func (m Methods) CreateReplay(ctx context.Context, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (*quarantine.ReplayBatch, error) {
	if err := r.Validate(0); err != nil {
		return nil, err
	}
	if err := m.b.SearchReady(ctx, search.FilterText(r.Filter)); err != nil {
		return nil, err
	}
	return Pin(ctx, m.b, &r, keyRule, m.clock)
}

// ChangeReplay applies c.Action to its batch, read (and locked, where
// the store locks rows) first, in one write transaction (Change); see
// store.Replays. Errors: EINVALID for an unknown action, ENOTFOUND for an
// unknown batch, ECONFLICT when the batch's state does not allow the
// action, when a draft expired before its start (it is expired,
// committed: ErrDraftExpired) or when a complete finds pending items,
// EUNAVAILABLE.
func (m Methods) ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b *quarantine.ReplayBatch
	var expired bool
	err := m.b.Write(ctx, "change a replay", func(tx Tx) (err error) {
		b, expired, err = Change(ctx, tx, c, m.clock())
		return err
	})
	if err != nil {
		return nil, err
	}
	if expired {
		return nil, ErrDraftExpired
	}
	return b, nil
}

// SetReplayCanary records the canary's verdict on the batch (read and
// locked, where the store locks rows), with until to the microsecond,
// unless the batch has that verdict already; see store.Replays. Errors:
// EINVALID for an unknown verdict, ENOTFOUND, EUNAVAILABLE.
func (m Methods) SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error) {
	if !ValidVerdict(verdict) {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "canary_verdict", "unknown canary verdict %q", quarantine.Clip(verdict))
	}
	var b *quarantine.ReplayBatch
	err := m.b.Write(ctx, "record a canary verdict", func(tx Tx) error {
		var err error
		if b, err = tx.GetBatch(ctx, batchID); err != nil || b.CanaryVerdict == verdict {
			return err
		}
		b.CanaryVerdict, b.CanaryUntil, b.UpdatedAt = verdict, nil, m.clock()
		if until != nil {
			u := until.UTC().Truncate(time.Microsecond)
			b.CanaryUntil = &u
		}
		return tx.SaveBatch(ctx, b)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ListReplays returns the batches matching f, newest first, f.Limit of
// them and the cursor of the next page ("" after the last); see
// store.Replays. Errors: EINVALID naming the field, EUNAVAILABLE.
func (m Methods) ListReplays(ctx context.Context, f quarantine.ReplayFilter) ([]*quarantine.ReplayBatch, string, error) {
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	out, err := m.b.Batches(ctx, f, f.Limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = out[f.Limit-1].ID
	}
	return out, next, nil
}

// RunnableReplays returns the running batches, the drafts expired at
// now and the scheduled batches due at now, oldest first; see
// store.Replays. The pinning batches nothing wrote to for PinStale (their
// server stopped mid-pin) are removed first, each in a write transaction
// of its own. Errors: EUNAVAILABLE.
func (m Methods) RunnableReplays(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error) {
	ids, err := m.b.StalePins(ctx, now.Add(-PinStale))
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := m.b.Write(ctx, "remove an abandoned pin", func(tx Tx) error { return tx.DeleteBatch(ctx, id) }); err != nil {
			return nil, err
		}
	}
	return m.b.Runnable(ctx, now)
}

// ListReplayItems returns f.Limit items of one batch in seq order after
// f.After, and whether more follow; see store.Replays. Errors: EINVALID
// for a bad filter, ENOTFOUND for an unknown batch, EUNAVAILABLE.
func (m Methods) ListReplayItems(ctx context.Context, f quarantine.ReplayItemFilter) ([]quarantine.ReplayItem, bool, error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	if !quarantine.ValidID(f.BatchID) {
		return nil, false, notfound.Replay(f.BatchID)
	}
	out, found, err := m.b.Items(ctx, f, f.Limit+1)
	if err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, notfound.Replay(f.BatchID)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}

// MessageReplayItems returns the replay items of message id, one per
// batch that held it, the latest limit batches (by batch id: creation
// order), oldest first (Reader.MessageItems). An unknown message has none
// (no error). Errors: EINVALID for a limit outside 1..quarantine.MaxLimit,
// EUNAVAILABLE.
func (m Methods) MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error) {
	if err := quarantine.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if !quarantine.ValidID(id) {
		return []quarantine.ReplayItem{}, nil
	}
	latest, err := m.b.MessageItems(ctx, id, limit)
	slices.Reverse(latest)
	return latest, err
}

// LeaseReplayItems leases up to n pending items of a running batch to
// owner; see store.Replays. Errors: EINVALID for an empty owner,
// EUNAVAILABLE, EINTERNAL.
func (m Methods) LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error) {
	out, _, _, err := m.LeaseReplayItemsWithin(ctx, batchID, owner, n, ttl, maxSeq, nil, 0, 0)
	return out, err
}

// LeaseReplayItemsWithin leases like LeaseReplayItems, but no more items
// than every one of buckets grants publish slots for, taken in the same
// transaction (ReserveSlots: the first at least lead after now, every one
// within ahead; TakeReplaySlots shares the schedule); it returns the
// first slot: the k-th item leased (in the order returned) must not be
// published before SlotTime(first, r, k), r the lowest rate of buckets.
// With no slot free it leases nothing and returns how long until there is
// one. No buckets: LeaseReplayItems (due now). The messages are read
// after the lease commits, outside its transaction (Leaser.LeasedMessages):
// the lease's locks are held shorter, and what is read is at least as
// new as the lease (a payload edited since is the one published, and
// recorded as such); when they cannot be read the leases are given back.
// Errors: EINVALID for an empty owner or a bad bucket, EUNAVAILABLE,
// EINTERNAL.
func (m Methods) LeaseReplayItemsWithin(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int, buckets []quarantine.RateBucket, lead, ahead time.Duration) ([]quarantine.ReplayLease, time.Time, time.Duration, error) {
	bs, lease, err := LeaseWithin(batchID, owner, n, buckets)
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	if !lease {
		return []quarantine.ReplayLease{}, time.Time{}, 0, nil
	}
	out, due, wait, err := m.b.Lease(ctx, LeaseRequest{BatchID: batchID, Owner: owner, N: n, TTL: ttl, MaxSeq: maxSeq,
		Buckets: bs, Lead: lead, Ahead: ahead})
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	if len(out) == 0 {
		return out, time.Time{}, wait, nil
	}
	if err := m.b.LeasedMessages(ctx, out); err != nil {
		if rerr := m.b.ReleaseReplayItems(context.WithoutCancel(ctx), out); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, time.Time{}, 0, err
	}
	return out, due, 0, nil
}

// ByID readies bs for a store's read of their counts: their counts
// zeroed (replays.ZeroCounts), the batches by id and their ids in order.
func ByID(bs []*quarantine.ReplayBatch) (map[string]*quarantine.ReplayBatch, []string) {
	byID := make(map[string]*quarantine.ReplayBatch, len(bs))
	ids := make([]string, len(bs))
	for i, b := range bs {
		byID[b.ID], ids[i] = b, b.ID
		b.Counts = ZeroCounts()
	}
	return byID, ids
}

// take grants from every bucket of bs (validated, in key order) what
// reserve grants, in one write transaction named what (Tx.TakeBuckets).
func (m Methods) take(ctx context.Context, what string, bs []quarantine.RateBucket, reserve Reserver) (n int, due time.Time, wait time.Duration, err error) {
	err = m.b.Write(ctx, what, func(tx Tx) (err error) {
		n, due, wait, err = tx.TakeBuckets(ctx, bs, reserve)
		return err
	})
	return n, due, wait, err
}

// TakeReplayTokens takes up to want tokens from every bucket at once,
// in one write transaction (Tx.TakeBuckets); see store.Replays. Errors: EINVALID for a bucket without
// key or positive rate, EUNAVAILABLE.
func (m Methods) TakeReplayTokens(ctx context.Context, buckets []quarantine.RateBucket, want int) (int, time.Duration, error) {
	bs, err := Buckets(buckets)
	switch {
	case err != nil:
		return 0, 0, err
	case want <= 0:
		return 0, 0, nil
	case len(bs) == 0:
		return want, 0, nil
	}
	n, _, wait, err := m.take(ctx, "take replay tokens", bs, ReserveTokens(want, 0))
	if err != nil {
		return 0, 0, err
	}
	return n, wait, nil
}

// TakeReplaySlots grants up to want publish slots from every bucket at
// once (ReserveSlots, in one write transaction): the first at least lead after
// now, every one at most ahead after now. It returns how many and the
// first (item k's slot is SlotTime(first, r, k), r the lowest rate of
// buckets), or, when none, how long until one is free; without buckets
// (or want) every slot is due now. See store.Replays. Errors: EINVALID
// for a bucket without key or positive rate, EUNAVAILABLE.
func (m Methods) TakeReplaySlots(ctx context.Context, buckets []quarantine.RateBucket, want int, lead, ahead time.Duration) (int, time.Time, time.Duration, error) {
	bs, err := Buckets(buckets)
	switch {
	case err != nil:
		return 0, time.Time{}, 0, err
	case want <= 0 || len(bs) == 0:
		return max(want, 0), m.clock(), 0, nil
	}
	n, first, wait, err := m.take(ctx, "take replay slots", bs, ReserveSlots(want, lead, ahead))
	if err != nil {
		return 0, time.Time{}, 0, err
	}
	return n, first, wait, nil
}

// HoldReplayTokens empties bucket key until until, in one write
// transaction (Tx.HoldBucket); see store.Replays. Errors: EINVALID for an
// empty key, EUNAVAILABLE.
func (m Methods) HoldReplayTokens(ctx context.Context, key string, until time.Time) error {
	if key == "" {
		return quarantine.Errorf(quarantine.EINVALID, "a rate bucket needs a key")
	}
	return m.b.Write(ctx, "hold replay tokens", func(tx Tx) error { return tx.HoldBucket(ctx, key, until) })
}
