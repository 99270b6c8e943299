package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// A lease that waited for a rate bucket held by another engine's
// transaction (a process stopped inside it, until the server ends its
// session) runs from when it got the bucket, not from when it started:
// otherwise it is already expired when it commits, and another engine
// leases and publishes the same items at once.
func TestLeaseWithinRunsFromTheBucketLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	s := openStore(t, postgres.WithClock(clock))
	res, err := s.InsertBatch(ctx, []*quarantine.Message{{
		Source: "rmq", SourceKind: quarantine.SourceRabbitMQ, Queue: "orders", JobName: "charge",
		MessageID: "m-1", IdempotencyKey: "key-1", KeyRule: quarantine.KeyRuleEnvelope,
		FailureClass: quarantine.ClassExhausted, Reason: "timeout", Payload: []byte(`{}`),
		ContentType: "application/json", DedupeKey: "d-1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateReplay(ctx, quarantine.ReplayRequest{IDs: []string{res[0].ID}, Rate: 10, Reason: "test", Actor: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs := []quarantine.RateBucket{{Key: "dest:lock", Rate: 10, Burst: 10}}
	if _, _, err := s.TakeReplayTokens(ctx, bs, 1); err != nil { // the bucket's row exists
		t.Fatal(err)
	}

	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	var pid int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT 1 FROM replay_buckets WHERE key = $1 FOR UPDATE`, bs[0].Key); err != nil {
		t.Fatal(err)
	}
	type leased struct {
		n   int
		err error
	}
	done := make(chan leased, 1)
	go func() {
		ls, _, _, err := s.LeaseReplayItemsWithin(ctx, b.ID, "engine-1", 1, 10*time.Second, 0, bs, 0, 0)
		done <- leased{len(ls), err}
	}()
	// Wait until the lease waits for the holder's lock.
	for {
		var waiting int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case l := <-done:
			t.Fatalf("the lease did not wait for the bucket's lock: %+v", l)
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	now = now.Add(time.Minute) // longer than the lease's ttl
	mu.Unlock()
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-done; l.err != nil || l.n != 1 {
		t.Fatalf("the lease after the wait: %+v, want its one item", l)
	}
	again, err := s.LeaseReplayItems(ctx, b.ID, "engine-2", 1, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("another engine leased the item at once: the first lease expired as it committed")
	}
}
