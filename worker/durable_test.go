package worker_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/worker"
	"github.com/quarantine-dev/quarantine/worker/claimtest"
	"github.com/quarantine-dev/quarantine/worker/pgclaims"
	"github.com/quarantine-dev/quarantine/worker/sqliteclaims"
)

// The worker on the durable claims: a completed key is a duplicate ever
// after, a dead-lettered key's replay runs, a consumer crash after the
// record is absorbed; then the shipped proof query (claims.sql) returns
// nothing.
func TestWorkerOnDurableClaims(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func(t *testing.T, now func() time.Time) worker.Claims
	}{
		{"sqlite", func(t *testing.T, now func() time.Time) worker.Claims {
			c, err := sqliteclaims.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"postgres", func(t *testing.T, now func() time.Time) worker.Claims {
			c, err := pgclaims.Open(context.Background(), pgtest.URL(t), now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := claimtest.NewClock(claimtest.Start)
			claims := c.open(t, clk.Now)
			e := newEnv(t, withClaims(claims))
			e.clk = clk
			var fixed, crashNextAck atomic.Bool
			e.claims.set(nil, func(string) {
				if crashNextAck.CompareAndSwap(true, false) {
					e.q.Crash() // dies after the record, before the ack
				}
			})
			e.start(worker.Job{Name: "j", Queue: "work", MaxAttempts: 3, Handler: func(_ context.Context, _ *worker.Job, d *worker.Delivery) error {
				key := d.Header(worker.HeaderIdempotencyKey)
				if key == "poison" && !fixed.Load() {
					return worker.Permanent(errBoom)
				}
				e.effect(key)
				return nil
			}})
			e.put("m1", "j", "k1", "{}")
			e.expect(worker.Completed, "")
			e.put("m2", "j", "k1", "{}")
			e.expect(worker.Duplicate, "")
			e.put("m3", "j", "poison", "{}")
			e.expect(worker.DeadLettered, string(quarantine.ClassPermanent))
			fixed.Store(true)
			e.put("m4", "j", "poison", "{}") // the replay of the fixed payload
			e.expect(worker.Completed, "")
			crashNextAck.Store(true)
			e.put("m5", "j", "k5", "{}")
			e.expect(worker.Duplicate, "") // the redelivery after the lost ack
			e.idle()
			for _, k := range []string{"k1", "poison", "k5"} {
				if n := e.effectsOf(k); n != 1 {
					t.Errorf("key %s: %d effects, want 1", k, n)
				}
			}
			claimtest.AssertProof(t, claims)
			claimtest.AssertProof(t, e.claims)
		})
	}
}
