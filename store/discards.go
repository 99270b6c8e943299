package store

import (
	"context"

	"github.com/quarantine-dev/quarantine"
)

// Discards is the durable state of discard operations: a discard by
// filter of any size, applied in chunks (quarantine.DiscardOperation).
type Discards interface {
	// StartDiscard records a running operation for d (a filter, already
	// narrowed to the requester's owners; d.IDs must be empty, EINVALID
	// otherwise). It takes a watermark of the insert order and counts the
	// messages matching d.Filter under it (Matched): that is the set the
	// chunks walk. d.CheckConfirmed(Matched, confirmAbove) decides whether
	// the count is confirmed (ECONFLICT or EUNPROCESSABLE naming
	// expect_count otherwise: nothing is recorded). Nothing is discarded
	// yet. Errors: EINVALID, EUNPROCESSABLE, ECONFLICT, EUNAVAILABLE.
	StartDiscard(ctx context.Context, d quarantine.Discard, confirmAbove int) (quarantine.DiscardOperation, error)

	// DiscardChunk applies the next chunk of the running operation id: up
	// to n messages of its set after its cursor, in the store's walk
	// order (ops.ChunkTx.Select), that still
	// match its filter, are locked, discarded (or skipped, by the status
	// rule) with one message.discard event for the chunk that names them
	// all (quarantine.DiscardChunkDetails; message.discard_refused for
	// each refusal), and the operation's cursor and counts advance, all in
	// one transaction. A chunk of fewer than n messages completes the
	// operation. It returns the operation after the chunk and what the
	// chunk did. An operation that is not running is returned as it is,
	// with an empty result. Errors: ENOTFOUND, EUNAVAILABLE, EINTERNAL.
	DiscardChunk(ctx context.Context, id string, n int) (quarantine.DiscardOperation, quarantine.BulkResult, error)

	// FailDiscard ends the running operation id as failed with reason
	// (the chunks committed stay applied). ENOTFOUND for an unknown id.
	FailDiscard(ctx context.Context, id, reason string) error

	// ResumeDiscard makes the operation id runnable again for actor and
	// returns it: a failed one is running again from its cursor (its
	// error cleared, the chunks already committed untouched); a running
	// one (interrupted or not) is returned as it is. Either way a
	// discard.resume event is appended in the same transaction. The
	// caller then applies its chunks (DiscardChunk). Errors: ENOTFOUND,
	// ECONFLICT for a completed one (nothing recorded), EUNAVAILABLE.
	ResumeDiscard(ctx context.Context, id, actor string) (quarantine.DiscardOperation, error)

	// GetDiscard returns the operation id, or ENOTFOUND.
	GetDiscard(ctx context.Context, id string) (quarantine.DiscardOperation, error)

	// RunningDiscards returns the operations still running, oldest first
	// (a serve resumes them at start).
	RunningDiscards(ctx context.Context) ([]quarantine.DiscardOperation, error)
}
