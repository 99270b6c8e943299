package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
)

// retentionStores name the stores the retention tests run on.
var retentionStores = []string{"sqlite", "postgres"}

// retentionStore opens a fresh store of kind (sqlite, or postgres in a
// fresh schema) holding one message in each status that matters to
// retention; it returns the store and the ids.
func retentionStore(t *testing.T, kind string) (store.Store, map[quarantine.Status]string) {
	t.Helper()
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	if kind == "postgres" {
		url = pgtest.URL(t)
	}
	st, err := storeopen.Store(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ids := map[quarantine.Status]string{}
	for i, status := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusDiscarded, quarantine.StatusReplayed} {
		m := &quarantine.Message{Source: "test", SourceKind: quarantine.SourceMemory, Queue: "q", JobName: "j",
			IdempotencyKey: "k" + string(status), Payload: []byte(`{"card":"4111"}`), ContentType: "application/json", Status: status,
			DedupeKey: "d" + string(rune('a'+i))}
		if _, err := st.InsertBatch(ctx, []*quarantine.Message{m}); err != nil {
			t.Fatal(err)
		}
		ids[status] = m.ID
	}
	return st, ids
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRetention_PurgesPastRetention runs one pass with a clock past the
// discarded retention but not the replayed one: only the discarded
// message loses its payload, its hash stays, and the purge is audited by
// system:retention. A second pass purges nothing more.
func TestRetention_PurgesPastRetention(t *testing.T) {
	t.Parallel()
	for _, kind := range retentionStores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testPurgesPastRetention(t, kind)
		})
	}
}

func testPurgesPastRetention(t *testing.T, kind string) {
	st, ids := retentionStore(t, kind)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	r := newRetention(st, RetentionConfig{Replayed: 1000 * time.Hour, Discarded: time.Hour, Every: time.Hour}, quietLogger(), reg)
	r.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	r.batch = 1 // several batches of one: the loop goes on while batches are full
	if n := r.purge(ctx); n != 1 {
		t.Fatalf("purged %d, want 1", n)
	}
	d, err := st.GetMessage(ctx, ids[quarantine.StatusDiscarded])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Payload) != 0 || !d.HasFlag(quarantine.FlagPayloadPurged) || d.PayloadSHA256 != quarantine.PayloadHash([]byte(`{"card":"4111"}`)) {
		t.Fatalf("discarded message after the purge: payload %q flags %v sha %s", d.Payload, d.Flags, d.PayloadSHA256)
	}
	for _, s := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusReplayed} {
		m, err := st.GetMessage(ctx, ids[s])
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload) != `{"card":"4111"}` || m.HasFlag(quarantine.FlagPayloadPurged) {
			t.Fatalf("%s message lost its payload", s)
		}
	}
	events, err := st.ListAudit(ctx, quarantine.AuditFilter{Action: quarantine.ActionPurge, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Actor != retentionActor {
		t.Fatalf("purge events %+v", events)
	}
	if !strings.Contains(string(events[0].Details), `"`+ids[quarantine.StatusDiscarded]+`"`) ||
		strings.Contains(string(events[0].Details), ids[quarantine.StatusReplayed]) {
		t.Fatalf("purge details %s do not list exactly the purged id", events[0].Details)
	}
	var metric dto.Metric
	if err := r.purged.WithLabelValues("discarded").Write(&metric); err != nil || metric.GetCounter().GetValue() != 1 {
		t.Fatalf("metric %v %v", metric.GetCounter().GetValue(), err)
	}
	if n := r.purge(ctx); n != 0 {
		t.Fatalf("a second pass purged %d", n)
	}
	if v, err := st.VerifyAudit(ctx); err != nil || !v.OK {
		t.Fatalf("chain %+v %v", v, err)
	}
}

// TestRetention_Loop starts the loop with a short period and a retention
// already past: the discarded payload goes within a few periods, and stop
// returns once the loop is done.
func TestRetention_Loop(t *testing.T) {
	t.Parallel()
	for _, kind := range retentionStores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testRetentionLoop(t, kind)
		})
	}
}

func testRetentionLoop(t *testing.T, kind string) {
	st, ids := retentionStore(t, kind)
	ctx := context.Background()
	r := newRetention(st, RetentionConfig{Replayed: 0, Discarded: time.Millisecond, Every: 20 * time.Millisecond}, quietLogger(), nil)
	r.now = func() time.Time { return time.Now().Add(time.Hour) } // the messages' updated_at is past the retention
	r.start()
	defer r.stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := st.GetMessage(ctx, ids[quarantine.StatusDiscarded])
		if err != nil {
			t.Fatal(err)
		}
		if m.HasFlag(quarantine.FlagPayloadPurged) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not purge the discarded payload")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.stop()
	r.stop() // idempotent
	// Replayed has no retention (0): kept.
	if m, _ := st.GetMessage(ctx, ids[quarantine.StatusReplayed]); m.HasFlag(quarantine.FlagPayloadPurged) {
		t.Fatal("a replayed payload was purged with replayed: 0")
	}
}

func TestRetention_Disabled(t *testing.T) {
	t.Parallel()
	r := newRetention(nil, RetentionConfig{Every: time.Hour}, quietLogger(), nil)
	r.stop() // never started: a no-op
	var none *retention
	none.stop()
}

// TestRetention_PurgesEndedSessions: a pass deletes the web UI's ended
// sessions, even when every payload is kept, and leaves live ones.
func TestRetention_PurgesEndedSessions(t *testing.T) {
	t.Parallel()
	for _, kind := range retentionStores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := retentionStore(t, kind)
			ctx := context.Background()
			_, tokenHash := quarantine.NewTokenSecret()
			liveID, liveHash := quarantine.NewSessionID()
			_, endedHash := quarantine.NewSessionID()
			if err := st.CreateSession(ctx, &quarantine.Session{IDHash: liveHash, TokenHash: tokenHash}, time.Hour, time.Hour); err != nil {
				t.Fatal(err)
			}
			// Ended at once: idle for a microsecond.
			if err := st.CreateSession(ctx, &quarantine.Session{IDHash: endedHash, TokenHash: tokenHash}, time.Microsecond, time.Hour); err != nil {
				t.Fatal(err)
			}
			r := newRetention(st, RetentionConfig{Every: time.Hour}, quietLogger(), nil) // payloads kept
			r.purge(ctx)
			if n, err := st.PurgeSessions(ctx); err != nil || n != 0 {
				t.Fatalf("after the retention pass PurgeSessions found %d ended sessions (%v), want 0", n, err)
			}
			if _, err := st.UseSession(ctx, quarantine.HashSessionID(liveID), time.Hour); err != nil {
				t.Fatalf("the live session: %v", err)
			}
		})
	}
}
