package replays

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
)

// Tx is what the replay flows below need of one store transaction. Each
// store implements it over its own driver; the flows hold the rules, so
// that the two stores cannot drift.
type Tx interface {
	// InsertBatch writes a new batch's row; InsertItems writes items of
	// it (and the counts they start with), one chunk at a time.
	InsertBatch(ctx context.Context, b *quarantine.ReplayBatch) error
	InsertItems(ctx context.Context, batchID string, items []quarantine.ReplayItem) error
	// DeleteBatch removes a batch that never left the pinning state,
	// with its items and counts.
	DeleteBatch(ctx context.Context, batchID string) error
	CheckIncident(ctx context.Context, g *quarantine.IncidentGuard, b *quarantine.ReplayBatch, force bool, now time.Time) error
	// GetBatch reads (and locks, where the store locks rows) a batch with
	// its counts; ENOTFOUND when there is none.
	GetBatch(ctx context.Context, id string) (*quarantine.ReplayBatch, error)
	// SaveBatch writes the fields of b that change after its creation
	// (the pinned set's total, queues and owners included).
	SaveBatch(ctx context.Context, b *quarantine.ReplayBatch) error
	// SavePin writes the total and update time of b, a batch being
	// pinned, first in a chunk's transaction (locking its row where the
	// store locks rows), and reports false when b is no longer pinning
	// (cancelled meanwhile): nothing is written then.
	SavePin(ctx context.Context, b *quarantine.ReplayBatch) (bool, error)
	// AddPin adds n to the total of batchID, a batch being pinned, and
	// sets its update time to at when later, last in a chunk's
	// transaction (locking its row where the store locks rows), and
	// reports false when the batch is no longer pinning: the chunk's
	// items must then be rolled back.
	AddPin(ctx context.Context, batchID string, n int, at time.Time) (bool, error)
	FillCounts(ctx context.Context, b *quarantine.ReplayBatch) error
	// CancelItems skips the pending items ("cancelled"), ending their hold
	// (InFlight); with release the messages an older version's leases
	// moved to replaying become quarantined again.
	CancelItems(ctx context.Context, batchID string, release bool, now time.Time) error
	CountPending(ctx context.Context, batchID string) (int, error)
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
	// TakeBuckets grants from every bucket of bs (validated, in key
	// order) what reserve grants: how many, when they are due (the first
	// slot, for slots), or, when none, how long until one can be.
	TakeBuckets(ctx context.Context, bs []quarantine.RateBucket, reserve Reserver) (n int, due time.Time, wait time.Duration, err error)
	// HoldBucket empties bucket key (not empty) until until.
	HoldBucket(ctx context.Context, key string, until time.Time) error
}

// Selector reads the candidates of a new batch, all in one snapshot of
// the messages (a read transaction): what matched when the pin began,
// however long the pin takes and whatever writers do meanwhile.
type Selector interface {
	// CountFilter counts the messages f matches (f as ops.SelectFilter
	// returns it).
	CountFilter(ctx context.Context, f quarantine.Filter) (int, error)
	// EachFilter calls fn with each message f matches, in id order, read
	// by one statement (no keyset query per chunk: each would search the
	// selection again); it stops at fn's first error and returns it.
	EachFilter(ctx context.Context, f quarantine.Filter, fn func(quarantine.ReplayCandidate) error) error
	// ByIDs reads the messages among ids (valid, distinct).
	ByIDs(ctx context.Context, ids []string) ([]quarantine.ReplayCandidate, error)
}

// Pinner is what CreateReplay needs of a store: one snapshot to select
// from, and short write transactions beside it (on SQLite the writer is
// released between them, so collectors keep storing).
type Pinner interface {
	Writer
	Snapshot(ctx context.Context, fn func(Selector) error) error
	// SearchReady returns once the text search index covers text (a
	// filter's Text; "" needs nothing), where the store waits for it.
	SearchReady(ctx context.Context, text string) error
	// HoldsWriter reports whether a write transaction holds the store's
	// one writer (SQLite): a pin then keeps each of its transactions
	// short (nextPinStep); else (PostgreSQL, where other writers do not
	// wait for it) it writes PinChunk items per transaction, each commit
	// a flush of the log fewer, pinWriters transactions at once.
	HoldsWriter() bool
}

// PinStale is how long a pinning batch may go without a chunk written
// before it counts as abandoned (its server stopped mid-pin) and is
// removed: a chunk takes well under a second.
const PinStale = time.Minute

// ErrDraftExpired is what a start of an expired draft returns, once the
// transaction that expired it committed.
var ErrDraftExpired = quarantine.Errorf(quarantine.ECONFLICT, "the draft expired")

// Pin is the body of CreateReplay (r validated): read the selection in
// one snapshot, check its count (quarantine.ReplayRequest.CheckCount),
// and write it as the items of a new batch. A selection of at most one
// chunk (ops.Chunk) is written in one transaction; a larger one is
// written in the pinning state, one chunk per transaction, then settled
// in a last one. The batch is then a draft (a dry run) or started; its
// events are appended in the transaction that settles it. No message
// changes status: a lease moves it (see the stores' lease). On an error
// after the first chunk, the pinning batch is deleted.
func Pin(ctx context.Context, p Pinner, r *quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc, clock func() time.Time) (*quarantine.ReplayBatch, error) {
	var b *quarantine.ReplayBatch
	var finish func() (*quarantine.ReplayBatch, error)
	err := p.Snapshot(ctx, func(sel Selector) error {
		now := clock()
		if r.Filter == nil {
			cs, err := ops.ReplayByIDs(r.IDs, r.Owners, func(valid []string) ([]quarantine.ReplayCandidate, error) {
				return sel.ByIDs(ctx, valid)
			})
			if err != nil {
				return err
			}
			if err := r.CheckStartAt(now); err != nil {
				return err
			}
			b, err = pinOnce(ctx, p, r, cs, keyRule, now)
			return err
		}
		f, ok, err := ops.SelectFilter(*r.Filter, r.Owners)
		if err != nil {
			return err
		}
		n := 0
		if ok {
			if n, err = sel.CountFilter(ctx, f); err != nil {
				return err
			}
		}
		if err := r.CheckCount(n); err != nil {
			return err
		}
		if err := r.CheckStartAt(now); err != nil {
			return err
		}
		if n <= ops.Chunk {
			cs := make([]quarantine.ReplayCandidate, 0, n)
			if n > 0 {
				if err := sel.EachFilter(ctx, f, func(c quarantine.ReplayCandidate) error {
					cs = append(cs, c)
					return nil
				}); err != nil {
					return err
				}
			}
			b, err = pinOnce(ctx, p, r, cs, keyRule, now)
			return err
		}
		finish, err = pinChunks(ctx, p, sel, f, n, r, keyRule, now, clock)
		return err
	})
	if finish != nil {
		// The snapshot is read (an error of its reads is finish's): it is
		// released (a PostgreSQL snapshot would otherwise sit idle in its
		// transaction while the last chunks are written), and the pin
		// ends. An error ending the read transaction came after every
		// read.
		return finish()
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// pinOnce writes a small selection as a batch in one transaction.
func pinOnce(ctx context.Context, p Pinner, r *quarantine.ReplayRequest, sel []quarantine.ReplayCandidate, keyRule quarantine.KeyRuleFunc, now time.Time) (*quarantine.ReplayBatch, error) {
	items, _, err := r.Plan(sel, keyRule)
	if err != nil {
		return nil, err
	}
	b := NewBatch(r, items, sel, now)
	err = p.Write(ctx, "create a replay", func(tx Tx) error {
		c := *b
		c.Counts = maps.Clone(b.Counts)
		if err := tx.InsertBatch(ctx, &c); err != nil {
			return err
		}
		if err := tx.InsertItems(ctx, c.ID, items); err != nil {
			return err
		}
		if err := settle(ctx, tx, r, &c, now); err != nil {
			return err
		}
		*b = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// PinChunk is how many candidates the snapshot of a pin reads ahead of
// its writes; a few such chunks are in memory at most (the one read, the
// one waiting, and one per writer).
const PinChunk = 10_000

// pinWriters is how many chunks of a pin are written at once where
// writers do not wait for each other (PostgreSQL): the copy of a chunk's
// items is most of a pin's time, and each takes one server process.
const pinWriters = 2

// A pin writes as many items per transaction as take about pinStepTarget
// (between pinStepMin and pinStepMax): on SQLite the single writer is held
// for one transaction, then released to collectors and HTTP ingest, so
// that one waits for tens of milliseconds at most whatever the machine's
// load; on an idle machine the transactions grow, and fewer commits write
// the same pages again.
const (
	pinStepMin    = 250
	pinStepMax    = 20_000
	pinStepTarget = 50 * time.Millisecond
)

// nextPinStep is the number of items of the next transaction of a pin
// after one of step items took d.
func nextPinStep(step int, d time.Duration) int {
	switch {
	case d < pinStepTarget/2:
		return min(step*2, pinStepMax)
	case d > pinStepTarget*2:
		return max(step/2, pinStepMin)
	}
	return step
}

// ErrPinCancelled is what a pin returns when its batch was cancelled
// while it was pinning: the batch stays, cancelled, with the items
// written before the cancel.
var ErrPinCancelled error = quarantine.Errorf(quarantine.ECONFLICT, "the replay was cancelled while it was pinning")

// pinChunks writes a large selection chunk by chunk (each its own
// transaction), then settles the batch. It reads the snapshot, by one
// statement, and plans each chunk's items (their seq follow the read
// order), while goroutines write the chunks read before (writeChunks, or
// pinWriters of writeChunksAtOnce where writers do not wait for each
// other); it returns once the snapshot is read, with finish, which waits
// for the last writes and settles the batch (or removes it).
func pinChunks(ctx context.Context, p Pinner, sel Selector, f quarantine.Filter, n int, r *quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc, now time.Time, clock func() time.Time) (finish func() (*quarantine.ReplayBatch, error), err error) {
	b := NewBatch(r, nil, nil, now)
	b.State, b.ExpiresAt = quarantine.ReplayPinning, nil
	b.PinTotal = n
	if err := p.Write(ctx, "create a replay", func(tx Tx) error { return tx.InsertBatch(ctx, b) }); err != nil {
		return nil, err
	}
	if r.OnPinning != nil {
		c := *b
		c.Counts = maps.Clone(b.Counts)
		r.OnPinning(&c)
	}
	queues, owners := map[string]bool{}, map[string]bool{}
	wctx, cancel := context.WithCancelCause(ctx)
	chunks := make(chan []quarantine.ReplayItem, 1)
	written := make(chan error, 1)
	go func() {
		var err error
		if p.HoldsWriter() {
			err = writeChunks(wctx, p, b, clock, chunks)
		} else {
			err = writeChunksAtOnce(wctx, p, b, clock, chunks)
		}
		if err != nil {
			cancel(err)
		}
		written <- err
	}()
	read := 0
	cs := make([]quarantine.ReplayCandidate, 0, PinChunk)
	send := func() error {
		if read+len(cs) > n {
			return quarantine.Errorf(quarantine.EINTERNAL, "the snapshot of a pin read more than the %d messages it counted", n)
		}
		items := r.PlanItems(cs, read, keyRule)
		for _, c := range cs {
			queues[c.Queue], owners[c.Owner] = true, true
		}
		read += len(cs)
		select {
		case chunks <- items:
			cs = cs[:0]
			return nil
		case <-wctx.Done():
			return context.Cause(wctx)
		}
	}
	rerr := sel.EachFilter(wctx, f, func(c quarantine.ReplayCandidate) error {
		if cs = append(cs, c); len(cs) == PinChunk {
			return send()
		}
		return nil
	})
	if rerr == nil && len(cs) > 0 {
		rerr = send()
	}
	if rerr != nil {
		cancel(rerr)
	}
	close(chunks)
	return func() (*quarantine.ReplayBatch, error) {
		err := <-written
		if cause := context.Cause(wctx); cause != nil {
			err = cause // the first failure, the reader's or the writer's
		}
		cancel(nil)
		if err == nil && b.Total != n {
			err = quarantine.Errorf(quarantine.EINTERNAL, "the snapshot of a pin read %d messages, not the %d it counted", b.Total, n)
		}
		if err == nil {
			b.Queues, b.Owners = sortedKeys(queues), sortedKeys(owners)
			shape(b, r)
			err = p.Write(ctx, "create a replay", func(tx Tx) error {
				now := clock().UTC().Truncate(time.Microsecond)
				b.UpdatedAt = now
				if ok, err := tx.SavePin(ctx, b); err != nil || !ok {
					return cmp.Or(err, ErrPinCancelled)
				}
				b.State = quarantine.ReplayDraft
				if r.DryRun {
					exp := now.Add(r.DraftTTL)
					b.ExpiresAt = &exp
				}
				return settle(ctx, tx, r, b, now)
			})
		}
		if err != nil {
			if errors.Is(err, ErrPinCancelled) {
				// The cancel ended the batch (audited there): it stays.
				return nil, err
			}
			// Nothing acted on a pinning batch: it goes, as if never made.
			if derr := p.Write(context.WithoutCancel(ctx), "remove an unfinished pin", func(tx Tx) error {
				return tx.DeleteBatch(ctx, b.ID)
			}); derr != nil {
				err = errors.Join(err, derr)
			}
			return nil, err
		}
		return b, nil
	}, nil
}

// prepare gives a chunk's items their batch and creation time.
func prepare(b *quarantine.ReplayBatch, items []quarantine.ReplayItem) {
	for i := range items {
		items[i].BatchID, items[i].UpdatedAt, items[i].DroppedHeaders = b.ID, b.CreatedAt, []string{}
	}
}

// writeChunks writes the chunks of items of b, a batch being pinned, in
// order, adding to b's total and counts, in transactions of nextPinStep
// items, each of which first checks (SavePin) that b is still pinning; it
// stops at the first error (ErrPinCancelled when b is no longer pinning).
// It is the writer of a store with one writer (SQLite).
func writeChunks(ctx context.Context, p Pinner, b *quarantine.ReplayBatch, clock func() time.Time, chunks <-chan []quarantine.ReplayItem) error {
	step := pinStepMin
	for items := range chunks {
		prepare(b, items)
		for len(items) > 0 {
			part := items[:min(step, len(items))]
			items = items[len(part):]
			var t0 time.Time
			err := p.Write(ctx, "pin a replay's chunk", func(tx Tx) error {
				t0 = time.Now()
				c := *b
				c.Total += len(part)
				c.UpdatedAt = clock().UTC().Truncate(time.Microsecond)
				// First: the batch's row, still pinning unless a cancel
				// came first.
				if ok, err := tx.SavePin(ctx, &c); err != nil || !ok {
					return cmp.Or(err, ErrPinCancelled)
				}
				return tx.InsertItems(ctx, b.ID, part)
			})
			if err != nil {
				return err
			}
			step = nextPinStep(step, time.Since(t0))
			b.Total += len(part)
			for _, it := range part {
				b.Counts[it.Outcome]++
			}
		}
	}
	return nil
}

// writeChunksAtOnce writes the chunks of items of b, a batch being
// pinned, pinWriters at a time, one transaction each, adding to b's
// total and counts; it stops at the first error (ErrPinCancelled when b
// is no longer pinning). Each transaction copies its items first, then
// adds them to the batch's total (AddPin), which locks the batch's row
// only until the commit, so that the copies run side by side: a cancel
// locks that row too, so a chunk either commits before it (and the
// cancel skips its items) or finds the batch no longer pinning and rolls
// back. The items' seq were given in read order, whatever order the
// chunks commit in.
func writeChunksAtOnce(ctx context.Context, p Pinner, b *quarantine.ReplayBatch, clock func() time.Time, chunks <-chan []quarantine.ReplayItem) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range pinWriters {
		wg.Go(func() {
			for items := range chunks {
				prepare(b, items)
				err := p.Write(ctx, "pin a replay's chunk", func(tx Tx) error {
					if err := tx.InsertItems(ctx, b.ID, items); err != nil {
						return err
					}
					ok, err := tx.AddPin(ctx, b.ID, len(items), clock().UTC().Truncate(time.Microsecond))
					if err != nil || !ok {
						return cmp.Or(err, ErrPinCancelled)
					}
					return nil
				})
				if err != nil {
					cancel(err)
					return
				}
				mu.Lock()
				b.Total += len(items)
				for _, it := range items {
					b.Counts[it.Outcome]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// settle ends the creation of b (a draft, its items written): it
// schedules it when r has StartAt, else starts it unless r is a dry run
// (checking the incident guard, completing it at once when nothing is
// pending), saves it, and appends its events.
func settle(ctx context.Context, tx Tx, r *quarantine.ReplayRequest, b *quarantine.ReplayBatch, now time.Time) error {
	if r.StartAt != nil {
		// Scheduled: pinned as a draft is, started by an engine at
		// StartAt (the incident guard is checked then).
		Schedule(b, *r.StartAt, r.Force)
	}
	events := CreateEvents(r, b)
	if !r.DryRun && r.StartAt == nil {
		// Started at once: the start of the draft it is, as a start of a
		// dry run's draft would be, in the same transaction.
		from := b.State
		to, action, err := quarantine.ReplayTransition(from, quarantine.ReplayActStart)
		if err != nil {
			return err
		}
		Move(b, to, "", now)
		events = append(events, ChangeEvent(r.Actor, action, b.ID, r.Reason, from, to))
		if err := tx.CheckIncident(ctx, r.Guard, b, r.Force, now); err != nil {
			return err
		}
		if b.Counts[quarantine.ItemPending] == 0 {
			events = append(events, Finish(b, now))
		}
	}
	if err := tx.SaveBatch(ctx, b); err != nil {
		return err
	}
	return tx.AppendAudits(ctx, events)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// finishChanged ends the complete action c on b (every item has an
// outcome, counts filled): the batch takes the state it ends in
// (completed or failed), recorded by one event.
func finishChanged(ctx context.Context, tx Tx, c quarantine.ReplayChange, b *quarantine.ReplayBatch, from quarantine.ReplayState, now time.Time) (*quarantine.ReplayBatch, bool, error) {
	to, why := b.DoneState()
	Move(b, to, why, now)
	reason := c.Reason
	if why != "" {
		reason += ": " + why
	}
	ev := ChangeEvent(c.Actor, quarantine.ActionReplayDone, b.ID, reason, from, to)
	if err := tx.SaveBatch(ctx, b); err != nil {
		return nil, false, err
	}
	return b, false, tx.AppendAudits(ctx, []*quarantine.AuditEvent{ev})
}

// Change is the body of ChangeReplay (c validated). When the action is a
// start of a draft past its expiry, the draft is expired instead and
// expired is true: the caller commits, then returns ErrDraftExpired.
func Change(ctx context.Context, tx Tx, c quarantine.ReplayChange, now time.Time) (b *quarantine.ReplayBatch, expired bool, err error) {
	if b, err = tx.GetBatch(ctx, c.BatchID); err != nil {
		return nil, false, err
	}
	from := b.State
	to, act, err := quarantine.ReplayTransition(from, c.Action)
	if err != nil {
		return nil, false, err
	}
	if c.Action == quarantine.ReplayActStart && Expired(b, now) {
		Move(b, quarantine.ReplayExpired, ErrDraftExpired.Message, now)
		if err := tx.SaveBatch(ctx, b); err != nil {
			return nil, false, err
		}
		return b, true, tx.AppendAudits(ctx, []*quarantine.AuditEvent{ChangeEvent(SystemActor,
			quarantine.ActionReplayExpire, b.ID, ErrDraftExpired.Message, from, quarantine.ReplayExpired)})
	}
	events := []*quarantine.AuditEvent{ChangeEvent(c.Actor, act, b.ID, c.Reason, from, to)}
	switch c.Action {
	case quarantine.ReplayActStart:
		if err := tx.CheckIncident(ctx, c.Guard, b, c.Force, now); err != nil {
			return nil, false, err
		}
		if f := ForceEvent(c.Actor, b.ID, c.Reason, false, c.Force, c.AcceptKeyRuleChange); f != nil {
			events = append(events, f)
		}
	case quarantine.ReplayActCancel:
		if err := tx.CancelItems(ctx, b.ID, from != quarantine.ReplayDraft && from != quarantine.ReplayScheduled, now); err != nil {
			return nil, false, err
		}
	case quarantine.ReplayActComplete:
		n, err := tx.CountPending(ctx, b.ID)
		if err != nil {
			return nil, false, err
		}
		if n > 0 {
			return nil, false, quarantine.Errorf(quarantine.ECONFLICT, "the replay still has %d pending items", n)
		}
		if err := tx.FillCounts(ctx, b); err != nil {
			return nil, false, err
		}
		return finishChanged(ctx, tx, c, b, from, now)
	}
	Move(b, to, c.Reason, now)
	if to == quarantine.ReplayRunning {
		n, err := tx.CountPending(ctx, b.ID)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			if err := tx.FillCounts(ctx, b); err != nil {
				return nil, false, err
			}
			events = append(events, Finish(b, now))
		}
	}
	if err := tx.SaveBatch(ctx, b); err != nil {
		return nil, false, err
	}
	if err := tx.FillCounts(ctx, b); err != nil {
		return nil, false, err
	}
	return b, false, tx.AppendAudits(ctx, events)
}
