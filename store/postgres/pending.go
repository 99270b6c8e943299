package postgres

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// The issue-4 store methods, being written now: this file goes away when
// they land.

func errPending() error { return quarantine.Errorf(quarantine.EINTERNAL, "not implemented yet") }

// EditPayload is not implemented yet.
func (s *Store) EditPayload(ctx context.Context, e quarantine.PayloadEdit) (*quarantine.Message, error) {
	return nil, errPending()
}

// Discard is not implemented yet.
func (s *Store) Discard(ctx context.Context, d quarantine.Discard) (quarantine.BulkResult, error) {
	return quarantine.BulkResult{}, errPending()
}

// Sample is not implemented yet.
func (s *Store) Sample(ctx context.Context, r quarantine.SampleRequest) ([]*quarantine.Message, error) {
	return nil, errPending()
}

// Groups is not implemented yet.
func (s *Store) Groups(ctx context.Context, f quarantine.Filter) ([]quarantine.Group, error) {
	return nil, errPending()
}

// QueueStats is not implemented yet.
func (s *Store) QueueStats(ctx context.Context, f quarantine.Filter, now time.Time) ([]quarantine.QueueStats, error) {
	return nil, errPending()
}

// PurgePayloads is not implemented yet.
func (s *Store) PurgePayloads(ctx context.Context, st quarantine.Status, before time.Time, limit int, actor string) (quarantine.PurgeResult, error) {
	return quarantine.PurgeResult{}, errPending()
}
