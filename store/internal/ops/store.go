package ops

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// DiscardWriter is one write transaction of a store as the discard
// methods (Discards) use it: a discard (Discard) or a chunk of a discard
// operation (DiscardChunk).
type DiscardWriter interface {
	DiscardTx
	ChunkTx
}

// DiscardBackend is what Discards need of a store.
type DiscardBackend interface {
	// SearchReady returns once the text search index covers text (a
	// filter's Text; "" needs nothing), where the store waits for it.
	SearchReady(ctx context.Context, text string) error
	// WriteDiscard runs fn in one write transaction of the store
	// (committed when fn returns nil); what names the work in its errors.
	WriteDiscard(ctx context.Context, what string, fn func(DiscardWriter) error) error
}

// Discards are the discard methods of store.Store and store.Discards
// that both stores share apart from SQL, written once over a store's
// DiscardBackend. A store embeds them (through an unexported alias), so
// that they are its own methods.
type Discards struct {
	b     DiscardBackend
	clock func() time.Time
}

// NewDiscards returns the Discards of a store over b; clock is the
// store's (UTC, to the microsecond).
func NewDiscards(b DiscardBackend, clock func() time.Time) Discards { return Discards{b, clock} }

// Discard marks the selected messages discarded; see store.Store. d is
// checked (CheckDiscard), the search index brought up to date for its
// text, then the selection (locked in id order, where the store locks
// rows), the status rule (quarantine.Status.Transition) applied to what
// is really stored and the change happen in one write transaction, with
// one message.discard event per change (Discard). Errors: EINVALID or
// EUNPROCESSABLE for a bad request, EUNPROCESSABLE when a filter matches
// more than quarantine.MaxBulk messages, ECONFLICT when d.ExpectCount is
// not the matched count, EUNAVAILABLE, EINTERNAL.
func (m Discards) Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error) {
	if err := CheckDiscard(d); err != nil {
		return quarantine.BulkResult{}, err
	}
	if err := m.b.SearchReady(ctx, search.FilterText(d.Filter)); err != nil {
		return quarantine.BulkResult{}, err
	}
	var res quarantine.BulkResult
	err := m.b.WriteDiscard(ctx, "discard messages", func(tx DiscardWriter) error {
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
func (m Discards) DiscardChunk(ctx context.Context, id string, n int) (quarantine.DiscardOperation, quarantine.BulkResult, error) {
	var op quarantine.DiscardOperation
	var res quarantine.BulkResult
	err := m.b.WriteDiscard(ctx, "discard a chunk", func(tx DiscardWriter) error {
		var err error
		op, res, err = DiscardChunk(ctx, id, n, m.clock(), tx)
		return err
	})
	return op, res, err
}

// ResumeDiscard makes a discard operation runnable again (ResumeDiscard)
// in one write transaction; the operation is locked first, as a chunk
// locks it. See store.Discards.
func (m Discards) ResumeDiscard(ctx context.Context, id, actor string) (op quarantine.DiscardOperation, err error) {
	err = m.b.WriteDiscard(ctx, "resume a discard", func(tx DiscardWriter) error {
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
