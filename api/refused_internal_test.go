package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

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
		f.refuse(ip)
		f.refuse(ip)
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
	if _, slowed := f.refuse("e"); slowed {
		t.Fatal("3 refusals throttled a client")
	}
}

// TestRefusalsGlobalBudget: past the global budget a refused attempt is
// slowed whichever client makes it, even one never refused before; the
// wait is until the global budget allows one more, and it refills.
func TestRefusalsGlobalBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newRefusals(func() time.Time { return now }, func(context.Context, quarantine.AuditEvent) error { return nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.global = rate.NewLimiter(rate.Every(time.Minute/60), 60) // 60 a minute
	for i := range 60 {
		if _, slowed := f.refuse(fmt.Sprintf("10.0.%d.%d", i/250, i%250)); slowed {
			t.Fatalf("refusal %d of 60 from distinct clients slowed", i)
		}
	}
	wait, slowed := f.refuse("192.0.2.1")
	if !slowed || wait <= 0 || wait > time.Second {
		t.Fatalf("the 61st refusal, from a new client: slowed %v for %s, want up to 1 s", slowed, wait)
	}
	now = now.Add(time.Second)
	if _, slowed := f.refuse("192.0.2.1"); slowed {
		t.Fatal("not allowed one more after the budget refilled by one")
	}
	if _, slowed := f.refuse("192.0.2.2"); !slowed {
		t.Fatal("two refusals after one refill")
	}
}
