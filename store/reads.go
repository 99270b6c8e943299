package store

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// MessageReplays reads a message's replays (the UI's timeline of it).
type MessageReplays interface {
	// MessageReplayItems returns the replay items of message id, one per
	// batch that held it, the latest limit batches (by batch id: creation
	// order), oldest first. An unknown message has none (no error).
	// EINVALID for a limit outside 1..quarantine.MaxLimit.
	MessageReplayItems(ctx context.Context, id string, limit int) ([]quarantine.ReplayItem, error)
}

// Search is the text search index that both stores keep in the
// background.
type Search interface {
	// SearchLag returns how long the oldest message waiting for the
	// search index has waited (0 when none waits). Errors: EUNAVAILABLE,
	// EINTERNAL.
	SearchLag(ctx context.Context) (time.Duration, error)
}
