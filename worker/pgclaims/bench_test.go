package pgclaims_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClaims measures claims/s on PostgreSQL: one claim and one
// complete of a fresh key per operation, from 2 × GOMAXPROCS goroutines.
//
//	go test -run '^$' -bench BenchmarkClaims ./worker/pgclaims/
func BenchmarkClaims(b *testing.B) {
	c := open(b, nil)
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(2)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("key-%d", seq.Add(1))
			cl, err := c.Claim(ctx, key, "owner", time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			if err := c.Complete(ctx, key, cl.Owner); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
}
