package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/store"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// TestMain removes the binary that testbin.Path built.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// discardKillRows is the size of the discard killed mid-way: many chunks.
const discardKillRows = 20_000

// A serve killed (SIGKILL) in the middle of a large discard by filter
// leaves whole chunks: as many messages discarded as the operation counts
// and as the message.discard events (one per chunk) name, the chain
// intact; the next serve resumes
// it to the end, every message of the set discarded exactly once.
func TestServe_DiscardSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quarantine binary")
	}
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testDiscardSurvivesKill(t, kind)
		})
	}
}

// discardCounts reads, from the store itself (serve stopped), the
// discarded messages and how many messages the message.discard events
// after seq name (chunk events, each checked), the chain verified.
func discardCounts(t *testing.T, url string, seq int64) (discarded int64, named int64, st store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := storeopen.Store(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	counts, err := st.CountByQueue(ctx, quarantine.Filter{Status: []quarantine.Status{quarantine.StatusDiscarded}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		discarded += c.Count
	}
	v, err := st.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	for {
		evs, err := st.ListAudit(ctx, quarantine.AuditFilter{Action: quarantine.ActionDiscard, Seq: seq, Limit: quarantine.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			d, ok := quarantine.ParseDiscardChunk(e)
			if !ok || d.Check() != nil {
				t.Fatalf("not a chunk's discard event: %+v", e)
			}
			named += int64(d.Count)
			seq = e.Seq
		}
		if len(evs) < quarantine.MaxLimit {
			return discarded, named, st
		}
	}
}

func testDiscardSurvivesKill(t *testing.T, kind string) {
	ctx := context.Background()
	dir := t.TempDir()
	url, args := "sqlite:"+filepath.Join(dir, "q.db"), []string(nil)
	if kind == "postgres" {
		url, args = pgtest.URL(t), []string{"--migrate"}
	}
	st, err := storeopen.Store(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.SeedBurst(t, st, discardKillRows, "burst")
	_ = st.Close()
	config := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("database: %q\nlisten: 127.0.0.1:0\n", url)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testbin.Path(t)
	p := testbin.Serve(t, bin, config, args...)
	client := p.API(p.Token)
	var before struct {
		Checked int64 `json:"checked"`
	}
	client.MustDo(t, 200, "GET", "/api/v1/audit/verify", nil, &before)

	var ans struct {
		Operation quarantine.DiscardOperation `json:"operation"`
	}
	body := map[string]any{"filter": map[string]any{"source": []string{"burst"}}, "reason": "incident 42"}
	if st, raw := client.Do(t, "POST", "/api/v1/messages/discard", body, nil); st != 422 {
		t.Fatalf("a discard of %d without expect_count: %d %s, want 422", discardKillRows, st, raw)
	}
	body["expect_count"] = discardKillRows
	client.MustDo(t, 202, "POST", "/api/v1/messages/discard", body, &ans)
	id := ans.Operation.ID
	// Killed once a chunk or more is applied, before the last.
	var op quarantine.DiscardOperation
	for deadline := time.Now().Add(time.Minute); op.Discarded == 0; time.Sleep(2 * time.Millisecond) {
		client.MustDo(t, 200, "GET", "/api/v1/discards/"+id, nil, &op)
		if time.Now().After(deadline) {
			t.Fatalf("no chunk applied in a minute: %+v", op)
		}
	}
	p.Kill()

	discarded, named, st := discardCounts(t, url, before.Checked)
	op, err = st.GetDiscard(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != quarantine.DiscardRunning || op.Discarded == 0 || op.Discarded >= discardKillRows {
		t.Fatalf("killed mid-way, the operation is %+v; want running with part of %d discarded (raise discardKillRows if it completed)", op, discardKillRows)
	}
	if discarded != op.Discarded || named != op.Discarded {
		t.Fatalf("after the kill: %d discarded, %d named by the events, the operation says %d: want the same (whole chunks)",
			discarded, named, op.Discarded)
	}
	t.Logf("killed after %d of %d", op.Discarded, discardKillRows)
	_ = st.Close()

	// The next serve resumes it.
	p = testbin.Serve(t, bin, config, args...)
	client.Base = p.API(client.Token).Base
	for deadline := time.Now().Add(10 * time.Minute); op.State == quarantine.DiscardRunning; time.Sleep(20 * time.Millisecond) {
		client.MustDo(t, 200, "GET", "/api/v1/discards/"+id, nil, &op)
		if time.Now().After(deadline) {
			t.Fatalf("not resumed to the end in 10 minutes: %+v", op)
		}
	}
	if op.State != quarantine.DiscardCompleted || op.Matched != discardKillRows || op.Discarded != discardKillRows || op.Skipped != 0 {
		t.Fatalf("after the restart: %+v, want completed with %d discarded", op, discardKillRows)
	}
	p.Kill()
	discarded, named, _ = discardCounts(t, url, before.Checked)
	if discarded != discardKillRows || named != discardKillRows {
		t.Fatalf("at the end: %d discarded, %d named by the events, want %d each", discarded, named, discardKillRows)
	}
}
