package sqliteclaims_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkClaims measures claims/s on SQLite: one claim and one complete
// of a fresh key per operation (the per-job cost), from 4 goroutines.
//
//	go test -run '^$' -bench BenchmarkClaims ./worker/sqliteclaims/
func BenchmarkClaims(b *testing.B) {
	c := open(b, nil)
	ctx := context.Background()
	var seq atomicCounter
	b.SetParallelism(2) // 2 × GOMAXPROCS goroutines
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("key-%d", seq.next())
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
