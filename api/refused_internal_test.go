package api

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// TestRefusalsBounded: the per-client map never holds more than its cap;
// an evicted client's pending counts are written, not lost.
func TestRefusalsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var written []quarantine.AuditEvent
	f := newRefusals(func() time.Time { return now }, func(_ context.Context, ev quarantine.AuditEvent) error {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, ev)
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.cap = 3
	for _, ip := range []string{"a", "b", "c", "d", "e"} {
		f.refused(ip)
		f.refused(ip)
	}
	f.mu.Lock()
	n, l := len(f.byIP), f.lru.Len()
	f.mu.Unlock()
	if n != 3 || l != 3 {
		t.Fatalf("%d clients tracked (%d in the list), want the cap 3", n, l)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 2 || written[0].Subject != "a" || written[1].Subject != "b" {
		t.Fatalf("evictions wrote %+v, want the pending counts of a and b", written)
	}
	if _, throttled := f.throttled("e"); throttled {
		t.Fatal("2 refusals throttled a client")
	}
}
