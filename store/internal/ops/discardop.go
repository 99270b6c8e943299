package ops

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// StartReader is what starting a discard operation reads of a store: its
// watermark and the count of the set under it, from one snapshot.
type StartReader interface {
	// Mark returns the watermark of the insert order now.
	Mark(ctx context.Context) (string, error)
	// Count counts the messages matching f under mark.
	Count(ctx context.Context, f quarantine.Filter, mark string) (int64, error)
}

// StartTx is a store's transaction that starts a discard operation in
// one go: read the watermark and the count, and record the operation.
type StartTx interface {
	StartReader
	// Insert records op.
	Insert(ctx context.Context, op quarantine.DiscardOperation) error
}

// NewDiscard checks d (a filter: EINVALID naming filter otherwise, and
// CheckDiscard), counts its set under a new watermark read by r, checks
// the count (d.CheckConfirmed with confirmAbove) and returns the running
// operation named id, started at now, for the store to record. A store
// whose reads and writes are separate transactions (SQLite: the count of
// a large set is read without holding the single writer) records it
// after its read ended; the others call StartDiscard.
func NewDiscard(ctx context.Context, d quarantine.Discard, confirmAbove int, id string, now time.Time, r StartReader) (quarantine.DiscardOperation, error) {
	if d.Filter == nil || len(d.IDs) > 0 {
		return quarantine.DiscardOperation{}, quarantine.FieldErrorf(quarantine.EINVALID, "filter", "a discard operation needs a filter, not ids")
	}
	if err := CheckDiscard(d); err != nil {
		return quarantine.DiscardOperation{}, err
	}
	f := *d.Filter
	f.After, f.Limit = nil, 0
	mark, err := r.Mark(ctx)
	if err != nil {
		return quarantine.DiscardOperation{}, err
	}
	n, err := r.Count(ctx, f, mark)
	if err != nil {
		return quarantine.DiscardOperation{}, err
	}
	if err := d.CheckConfirmed(n, confirmAbove); err != nil {
		return quarantine.DiscardOperation{}, err
	}
	return quarantine.DiscardOperation{ID: id, State: quarantine.DiscardRunning, Actor: d.Actor, Reason: d.Reason,
		Matched: n, StartedAt: now, UpdatedAt: now, Filter: f, Mark: mark}, nil
}

// StartDiscard is NewDiscard and the record of the operation in the same
// transaction tx.
func StartDiscard(ctx context.Context, d quarantine.Discard, confirmAbove int, id string, now time.Time, tx StartTx) (quarantine.DiscardOperation, error) {
	op, err := NewDiscard(ctx, d, confirmAbove, id, now, tx)
	if err != nil {
		return op, err
	}
	return op, tx.Insert(ctx, op)
}

// ChunkTx is what the transaction of one chunk of a discard operation
// (DiscardChunk) needs of a store's transaction.
type ChunkTx interface {
	Holds
	// Lock reads the operation id and locks it until the transaction
	// ends (ENOTFOUND for an unknown id).
	Lock(ctx context.Context, id string) (quarantine.DiscardOperation, error)
	// Select returns (and locks, where the store locks rows) up to limit
	// messages of op's set (matching op.Filter under op.Mark) after
	// op.Cursor in the store's walk order, with their statuses, and the
	// cursor after the last of them (op.Cursor when there are none), and
	// whether the walk reached the end of the set (it walked fewer than
	// limit messages: a store that locks may return fewer than it walked,
	// leaving out those that no longer match once locked). The walk order
	// is the store's: one that visits every message of the set once,
	// whatever is stored meanwhile.
	Select(ctx context.Context, op quarantine.DiscardOperation, limit int) (sel []quarantine.Selected, next string, end bool, err error)
	// MarkDiscardedFrom sets the status of ids, all in status from, to
	// discarded, now, by the audit event seq (the chunk's message.discard
	// event, appended before: the store lists it under each of ids).
	MarkDiscardedFrom(ctx context.Context, from quarantine.Status, ids []string, seq int64) error
	// AppendAudits seals events (each gets its Seq) and appends them in
	// the same transaction.
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
	// Save stores op's state, cursor, counts, error and times (updated,
	// finished).
	Save(ctx context.Context, op quarantine.DiscardOperation) error
}

// DiscardChunk applies the next chunk (up to n messages) of the operation
// id at now, inside a store's transaction: the status rule and the audit
// events of quarantine.Discard.PlanChunk (one message.discard event for
// the chunk, naming every message it discards), then the operation's
// progress. A
// chunk that walked fewer than n messages completes the operation; an operation
// that is not running is returned unchanged.
func DiscardChunk(ctx context.Context, id string, n int, now time.Time, tx ChunkTx) (quarantine.DiscardOperation, quarantine.BulkResult, error) {
	res := quarantine.BulkResult{Changed: []string{}, Skipped: []quarantine.BulkSkipped{}}
	op, err := tx.Lock(ctx, id)
	if err != nil || op.State != quarantine.DiscardRunning {
		return op, res, err
	}
	sel, next, end, err := tx.Select(ctx, op, n)
	if err == nil {
		err = markHeld(ctx, sel, tx)
	}
	if err != nil {
		return op, res, err
	}
	d := quarantine.Discard{Reason: op.Reason, Actor: op.Actor}
	res, events, err := d.PlanChunk(op.ID, sel)
	if err != nil {
		return op, res, err
	}
	// The events first, then the status change: the change moves the
	// kept counts (failure groups, waiting minutes) that collectors'
	// inserts move too, and their rows stay locked (PostgreSQL) from then
	// until the commit; appending the events before keeps that short.
	if err := tx.AppendAudits(ctx, events); err != nil {
		return op, res, err
	}
	var seq int64
	if len(res.Changed) > 0 {
		seq = events[len(events)-1].Seq // PlanChunk's event, sealed
	}
	if err := markByStatus(ctx, sel, res.Changed, seq, tx); err != nil {
		return op, res, err
	}
	op.Discarded += int64(len(res.Changed))
	op.Skipped += int64(len(res.Skipped))
	op.Cursor = next
	op.UpdatedAt = now
	if end {
		op.State, op.FinishedAt = quarantine.DiscardCompleted, &now
	}
	return op, res, tx.Save(ctx, op)
}

// markByStatus calls tx.MarkDiscardedFrom once per status of the changed messages of sel,
// in the order of quarantine.Statuses, with their ids and the seq of the
// event that records them: a store moves each status's counts in one go.
func markByStatus(ctx context.Context, sel []quarantine.Selected, changed []string, seq int64, tx ChunkTx) error {
	status := make(map[string]quarantine.Status, len(sel))
	for _, m := range sel {
		status[m.ID] = m.Status
	}
	by := map[quarantine.Status][]string{}
	for _, id := range changed {
		by[status[id]] = append(by[status[id]], id)
	}
	for _, st := range quarantine.Statuses {
		if ids := by[st]; len(ids) > 0 {
			if err := tx.MarkDiscardedFrom(ctx, st, ids, seq); err != nil {
				return err
			}
		}
	}
	return nil
}

// ResumeDiscard is what resuming operation op at now by actor changes,
// and its discard.resume audit event: a running one (interrupted or not)
// stays as it is (changed false: the caller runs its chunks); a failed
// one runs again from its cursor, its error cleared (changed true: the
// store saves it); a completed one cannot be resumed (ECONFLICT, no
// event).
func ResumeDiscard(op quarantine.DiscardOperation, actor string, now time.Time) (quarantine.DiscardOperation, *quarantine.AuditEvent, bool, error) {
	if actor == "" {
		return op, nil, false, quarantine.Errorf(quarantine.EINTERNAL, "a resume needs an actor")
	}
	was := op.Shown(now)
	ev := quarantine.NewAuditEvent(actor, quarantine.ActionDiscardResume, op.ID, map[string]any{
		"previous_state": was.State, "matched": op.Matched, "discarded": op.Discarded, "skipped": op.Skipped, "error": op.Error})
	switch op.State {
	case quarantine.DiscardRunning:
		return op, &ev, false, nil
	case quarantine.DiscardFailed:
		op.State, op.Error, op.UpdatedAt, op.FinishedAt = quarantine.DiscardRunning, "", now, nil
		return op, &ev, true, nil
	}
	return op, nil, false, quarantine.Errorf(quarantine.ECONFLICT, "the discard is %s: there is nothing to resume", op.State)
}

// Resume returns the filter from which the next chunk of op is read,
// newest first after op's cursor (the list's, encoded), or byID when the
// cursor is an id: an operation started by an earlier version goes on in
// id order.
func Resume(op quarantine.DiscardOperation) (f quarantine.Filter, byID bool) {
	f = op.Filter
	if op.Cursor != "" {
		after, err := quarantine.DecodeCursor(op.Cursor)
		if err != nil {
			return f, true
		}
		f.After = after
	}
	return f, false
}
