package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/replay"
)

// A dry run of HTTP-ingested messages with no destination configured
// answers them all undeliverable, each with the reason; messages without
// a key are undeliverable as skipped.
func TestReplayDryRunNamesUndeliverableMessages(t *testing.T) {
	t.Parallel()
	routes := &replay.Routes{Brokers: map[string]replay.Broker{}}
	e := newEnv(t, func(c *api.Config) {
		c.Replay.Route = func(b *quarantine.ReplayBatch, m *quarantine.Message) error { _, err := routes.Route(b, m); return err }
	})
	a, b := e.ingestOne("payments", "charge", `{"n":1}`), e.ingestOne("payments", "charge", `{"n":2}`)
	nokey := e.ingestWithHeaders("payments", 3, nil)
	var out struct {
		Replay struct {
			Total int `json:"total"`
		} `json:"replay"`
		Undeliverable quarantine.Undeliverable `json:"undeliverable"`
	}
	e.json(http.MethodPost, "/api/v1/replays", e.operator, map[string]any{"ids": []string{a, b, nokey}, "dry_run": true, "reason": "try"}).
		want(t, http.StatusCreated).decode(t, &out)
	if out.Undeliverable.Count != 3 || len(out.Undeliverable.Items) != 3 {
		t.Fatalf("undeliverable %+v", out.Undeliverable)
	}
	why := map[string]string{}
	for _, it := range out.Undeliverable.Items {
		why[it.MessageID] = it.Reason
		if it.Queue != "payments" {
			t.Errorf("item %s: queue %q", it.MessageID, it.Queue)
		}
	}
	if !strings.Contains(why[a], "configure a destination for queue payments") || !strings.Contains(why[b], "HTTP ingest") ||
		!strings.Contains(why[nokey], "no idempotency key") {
		t.Fatalf("reasons %v", why)
	}
	// Without a route check (no replay engine), only the skipped are named.
	e2 := newEnv(t)
	c := e2.ingestOne("payments", "charge", `{"n":1}`)
	e2.json(http.MethodPost, "/api/v1/replays", e2.operator, map[string]any{"ids": []string{c}, "dry_run": true, "reason": "try"}).
		want(t, http.StatusCreated).decode(t, &out)
	if out.Undeliverable.Count != 0 || out.Undeliverable.Items == nil {
		t.Fatalf("without routes: %+v", out.Undeliverable)
	}
}
