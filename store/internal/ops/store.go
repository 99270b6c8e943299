package ops

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// Tx is one write transaction of a store as Methods use it: a discard
// (Discard), a chunk of a discard operation (DiscardChunk), an edit
// (Edit) or a re-key (Rekey).
type Tx interface {
	DiscardTx
	ChunkTx
	EditTx
	RekeyTx
}

// Backend is what Methods need of a store.
type Backend interface {
	// SearchReady returns once the text search index covers text (a
	// filter's Text; "" needs nothing), where the store waits for it.
	SearchReady(ctx context.Context, text string) error
	// WriteOps runs fn in one write transaction of the store (committed
	// when fn returns nil); what names the work in its errors.
	WriteOps(ctx context.Context, what string, fn func(Tx) error) error
}

// Methods are the operator actions of store.Store and store.Discards
// that both stores share apart from SQL, written once over a store's
// Backend. A store embeds them (through an unexported alias), so that
// they are its own methods.
type Methods struct {
	b     Backend
	clock func() time.Time
}

// NewMethods returns the Methods of a store over b; clock is the
// store's (UTC, to the microsecond).
func NewMethods(b Backend, clock func() time.Time) Methods { return Methods{b, clock} }

// Discard marks the selected messages discarded; see store.Store. d is
// checked (CheckDiscard), the search index brought up to date for its
// text, then the selection (locked in id order, where the store locks
// rows), the status rule (quarantine.Status.Transition) applied to what
// is really stored and the change happen in one write transaction, with
// one message.discard event per change (Discard). Errors: EINVALID or
// EUNPROCESSABLE for a bad request, EUNPROCESSABLE when a filter matches
// more than quarantine.MaxBulk messages, ECONFLICT when d.ExpectCount is
// not the matched count, EUNAVAILABLE, EINTERNAL.
func (m Methods) Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error) {
	if err := CheckDiscard(d); err != nil {
		return quarantine.BulkResult{}, err
	}
	if err := m.b.SearchReady(ctx, search.FilterText(d.Filter)); err != nil {
		return quarantine.BulkResult{}, err
	}
	var res quarantine.BulkResult
	err := m.b.WriteOps(ctx, "discard messages", func(tx Tx) error {
		var err error
		res, err = Discard(ctx, d, tx)
		return err
	})
	if err != nil {
		return quarantine.BulkResult{}, err
	}
	return res, nil
}

// DiscardChunk applies the next chunk of a discard operation in one
// write transaction (DiscardChunk); see store.Discards.
func (m Methods) DiscardChunk(ctx context.Context, id string, n int) (quarantine.DiscardOperation, quarantine.BulkResult, error) {
	var op quarantine.DiscardOperation
	var res quarantine.BulkResult
	err := m.b.WriteOps(ctx, "discard a chunk", func(tx Tx) error {
		var err error
		op, res, err = DiscardChunk(ctx, id, n, m.clock(), tx)
		return err
	})
	return op, res, err
}

// ResumeDiscard makes a discard operation runnable again (ResumeDiscard)
// in one write transaction; the operation is locked first, as a chunk
// locks it. See store.Discards.
func (m Methods) ResumeDiscard(ctx context.Context, id, actor string) (op quarantine.DiscardOperation, err error) {
	err = m.b.WriteOps(ctx, "resume a discard", func(tx Tx) error {
		if op, err = tx.Lock(ctx, id); err != nil {
			return err
		}
		var ev *quarantine.AuditEvent
		var changed bool
		if op, ev, changed, err = ResumeDiscard(op, actor, m.clock()); err != nil {
			return err
		}
		if changed {
			if err = tx.Save(ctx, op); err != nil {
				return err
			}
		}
		return tx.AppendAudits(ctx, []*quarantine.AuditEvent{ev})
	})
	return op, err
}

// EditPayload stores e.Payload as the message's next payload version;
// see store.Store. e is checked first (CheckEdit); then, in one write
// transaction, the message's row is read (locked, where the store locks
// rows) before its hash is compared with e.IfMatch (Edit): of concurrent
// edits with the same IfMatch exactly one wins, the others get
// EPRECONDITION. Errors: EINVALID or EUNPROCESSABLE for a bad edit
// (e.Validate), ENOTFOUND, ECONFLICT while replaying or once discarded,
// EPRECONDITION, EUNPROCESSABLE when the payload is unchanged
// (e.CheckCurrent), EUNAVAILABLE, EINTERNAL.
func (m Methods) EditPayload(ctx context.Context, e quarantine.PayloadEdit) (*quarantine.Message, error) {
	if err := CheckEdit(e); err != nil {
		return nil, err
	}
	var out *quarantine.Message
	err := m.b.WriteOps(ctx, "edit a payload", func(tx Tx) (err error) {
		out, err = Edit(ctx, e, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RekeyMessages applies r in one write transaction (Rekey); see
// store.Store.
func (m Methods) RekeyMessages(ctx context.Context, r quarantine.Rekey) ([]string, error) {
	var out []string
	err := m.b.WriteOps(ctx, "re-key messages", func(tx Tx) (err error) {
		out, err = Rekey(ctx, r, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
