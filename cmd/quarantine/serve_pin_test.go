package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	storeopen "github.com/quarantine-dev/quarantine/store/open"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// pinBatch is a batch as GET /api/v1/replays/{id} shows it.
type pinBatch struct {
	ID       string         `json:"id"`
	State    string         `json:"state"`
	Total    int            `json:"total"`
	PinTotal int            `json:"pin_total"`
	Counts   map[string]int `json:"counts"`
}

// TestPinKilled: serve is killed (SIGKILL) while it pins a dry run of
// 12,000 messages (answered 202, pinning). After a restart the batch is
// complete (a draft of all of them), or pinning with a consistent count
// (its items are its total) until the engine removes it as abandoned,
// then absent; never a batch with a partial set.
func TestPinKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for an abandoned pin to be removed (a minute)")
	}
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			const n = 12_000
			db := testbin.BenchDatabase(t, st)
			s, err := storeopen.Store(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.SeedBurst(t, s, n, "killed")
			s.Close()
			config := filepath.Join(t.TempDir(), "quarantine.yaml")
			if err := os.WriteFile(config, fmt.Appendf(nil, "database: %q\nlisten: 127.0.0.1:0\nreplay:\n  poll: 100ms\n", db), 0o600); err != nil {
				t.Fatal(err)
			}
			bin := testbin.Path(t)
			p := testbin.Serve(t, bin, config)
			token := p.Token // printed at the first start only
			api := p.API(token)
			var created struct{ Replay pinBatch }
			api.MustDo(t, http.StatusAccepted, http.MethodPost, "/api/v1/replays", map[string]any{
				"filter": map[string]any{"failed_before": storetest.BurstNow}, "reason": "incident", "dry_run": true}, &created)
			p.Signal(t, syscall.SIGKILL)
			if !p.Exited(10 * time.Second) {
				t.Fatal("serve outlived SIGKILL")
			}
			if created.Replay.State != "pinning" || created.Replay.PinTotal != n {
				t.Fatalf("accepted %+v", created.Replay)
			}
			id := created.Replay.ID

			p = testbin.Serve(t, bin, config)
			api = p.API(token)
			seen := map[string]bool{}
			// The store's PinStale is a minute: an abandoned pin is gone within two.
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
				var b pinBatch
				code, body := api.Do(t, http.MethodGet, "/api/v1/replays/"+id, nil, &b)
				switch {
				case code == http.StatusNotFound:
					t.Logf("after the restart: %v, then absent", seen)
					return
				case code != http.StatusOK:
					t.Fatalf("GET: %d %s", code, body)
				case b.State == "draft":
					if b.Total != n || b.Counts["pending"]+b.Counts["skipped"] != n {
						t.Fatalf("a complete pin holds %d items (counts %v), want %d", b.Total, b.Counts, n)
					}
					t.Log("the pin had completed before the kill")
					return
				case b.State != "pinning":
					t.Fatalf("after the restart the batch is %s", b.State)
				}
				seen[b.State+" "+strconv.Itoa(b.Total)] = true
				items, ok := countItems(t, api, id)
				if !ok {
					// Removed as abandoned between the two reads.
					t.Logf("after the restart: %v, then absent", seen)
					return
				}
				if items != b.Total || b.Counts["pending"]+b.Counts["skipped"] != b.Total || b.Total >= n {
					t.Fatalf("a pinning batch shows total %d (counts %v) and holds %d items", b.Total, b.Counts, items)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the abandoned pin is still there: %+v", b)
				}
			}
		})
	}
}

// countItems counts a batch's items, page after page; false when the
// batch is gone (removed as an abandoned pin while it was being read: the
// removal takes the batch and all its items in one transaction).
func countItems(t *testing.T, api testbin.API, id string) (int, bool) {
	t.Helper()
	n, cursor := 0, ""
	for {
		var page struct {
			Items      []struct{} `json:"items"`
			NextCursor *string    `json:"next_cursor"`
		}
		switch code, body := api.Do(t, http.MethodGet, "/api/v1/replays/"+id+"/items?limit=1000&cursor="+cursor, nil, &page); code {
		case http.StatusOK:
		case http.StatusNotFound:
			return 0, false
		default:
			t.Fatalf("GET items: %d %s", code, body)
		}
		n += len(page.Items)
		if page.NextCursor == nil || len(page.Items) == 0 {
			return n, true
		}
		cursor = *page.NextCursor
	}
}
