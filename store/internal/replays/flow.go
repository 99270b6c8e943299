package replays

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Tx is what the replay flows below need of one store transaction. Each
// store implements it over its own driver; the flows hold the rules, so
// that the two stores cannot drift.
type Tx interface {
	// Candidates locks (where the store locks rows) and reads the
	// messages r selects: IDs in the order given, a filter in id order.
	Candidates(ctx context.Context, r *quarantine.ReplayRequest) ([]quarantine.ReplayCandidate, error)
	InsertReplay(ctx context.Context, b *quarantine.ReplayBatch, items []quarantine.ReplayItem) error
	SetReplaying(ctx context.Context, messageIDs []string, now time.Time) error
	CheckIncident(ctx context.Context, g *quarantine.IncidentGuard, b *quarantine.ReplayBatch, force bool, now time.Time) error
	// GetBatch reads (and locks, where the store locks rows) a batch with
	// its counts; ENOTFOUND when there is none.
	GetBatch(ctx context.Context, id string) (*quarantine.ReplayBatch, error)
	SaveBatch(ctx context.Context, b *quarantine.ReplayBatch) error
	FillCounts(ctx context.Context, b *quarantine.ReplayBatch) error
	// StartItems skips the pending items whose message is no longer
	// quarantined and moves the others' messages to replaying.
	StartItems(ctx context.Context, batchID string, now time.Time) error
	// CancelItems skips the pending items ("cancelled"); with release
	// their messages become quarantined again.
	CancelItems(ctx context.Context, batchID string, release bool, now time.Time) error
	CountPending(ctx context.Context, batchID string) (int, error)
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
}

// ErrDraftExpired is what a start of an expired draft returns, once the
// transaction that expired it committed.
var ErrDraftExpired = quarantine.Errorf(quarantine.ECONFLICT, "the draft expired")

// Create is the body of CreateReplay (r validated): pin the selection as
// the items of a new batch, start it unless r is a dry run (completing it
// at once when nothing is pending), and append its events.
func Create(ctx context.Context, tx Tx, r *quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc, now time.Time) (*quarantine.ReplayBatch, error) {
	sel, err := tx.Candidates(ctx, r)
	if err != nil {
		return nil, err
	}
	items, _, err := r.Plan(sel, keyRule)
	if err != nil {
		return nil, err
	}
	if err := r.CheckStartAt(now); err != nil {
		return nil, err
	}
	b := NewBatch(r, items, sel, now)
	if r.StartAt != nil {
		// Scheduled: pinned as a draft is, started by an engine at
		// StartAt (the incident guard is checked then).
		Schedule(b, *r.StartAt, r.Force)
		return b, insertThenAudit(ctx, tx, b, items, CreateEvents(r, b))
	}
	events := CreateEvents(r, b)
	if !r.DryRun {
		// Started at once: the start of the draft it is, as a start of a
		// dry run's draft would be, in the same transaction.
		from := b.State
		to, action, err := quarantine.ReplayTransition(from, quarantine.ReplayActStart)
		if err != nil {
			return nil, err
		}
		Move(b, to, "", now)
		events = append(events, ChangeEvent(r.Actor, action, b.ID, r.Reason, from, to))
	}
	if err := tx.InsertReplay(ctx, b, items); err != nil {
		return nil, err
	}
	if !r.DryRun {
		if err := tx.CheckIncident(ctx, r.Guard, b, r.Force, now); err != nil {
			return nil, err
		}
		if err := tx.SetReplaying(ctx, Pending(items), now); err != nil {
			return nil, err
		}
		if b.Counts[quarantine.ItemPending] == 0 {
			events = append(events, Finish(b, now))
			if err := tx.SaveBatch(ctx, b); err != nil {
				return nil, err
			}
		}
	}
	return b, tx.AppendAudits(ctx, events)
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
		if err := tx.StartItems(ctx, b.ID, now); err != nil {
			return nil, false, err
		}
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

// insertThenAudit stores a new batch that does not start (its items as
// planned) and appends its events.
func insertThenAudit(ctx context.Context, tx Tx, b *quarantine.ReplayBatch, items []quarantine.ReplayItem, events []*quarantine.AuditEvent) error {
	if err := tx.InsertReplay(ctx, b, items); err != nil {
		return err
	}
	return tx.AppendAudits(ctx, events)
}
