package postgres

// Placeholders until the replay store is implemented (issue 8).

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func notYet() error { return quarantine.Errorf(quarantine.EINTERNAL, "replays are not implemented yet") }

func (s *Store) CreateReplay(ctx context.Context, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) (*quarantine.ReplayBatch, error) {
	return nil, notYet()
}
func (s *Store) GetReplay(ctx context.Context, id string) (*quarantine.ReplayBatch, error) {
	return nil, notYet()
}
func (s *Store) ListReplays(ctx context.Context, f quarantine.ReplayFilter) ([]*quarantine.ReplayBatch, string, error) {
	return nil, "", notYet()
}
func (s *Store) ListReplayItems(ctx context.Context, f quarantine.ReplayItemFilter) ([]quarantine.ReplayItem, bool, error) {
	return nil, false, notYet()
}
func (s *Store) ChangeReplay(ctx context.Context, c quarantine.ReplayChange) (*quarantine.ReplayBatch, error) {
	return nil, notYet()
}
func (s *Store) RunnableReplays(ctx context.Context, now time.Time) ([]*quarantine.ReplayBatch, error) {
	return nil, notYet()
}
func (s *Store) LeaseReplayItems(ctx context.Context, batchID, owner string, n int, ttl time.Duration, maxSeq int) ([]quarantine.ReplayLease, error) {
	return nil, notYet()
}
func (s *Store) ReleaseReplayItems(ctx context.Context, leases []quarantine.ReplayLease) error {
	return notYet()
}
func (s *Store) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	return nil, notYet()
}
func (s *Store) SetReplayCanary(ctx context.Context, batchID, verdict string, until *time.Time) (*quarantine.ReplayBatch, error) {
	return nil, notYet()
}
func (s *Store) TakeReplayTokens(ctx context.Context, buckets []quarantine.RateBucket, want int) (int, time.Duration, error) {
	return 0, 0, notYet()
}
