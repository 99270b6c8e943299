package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

type groupJSON struct {
	Fingerprint string   `json:"fingerprint"`
	JobName     string   `json:"job_name"`
	Reason      string   `json:"reason"`
	Count       int64    `json:"count"`
	Queues      []string `json:"queues"`
	ExampleID   string   `json:"example_id"`
}

func TestGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedSet(e)
	var l struct{ Items []groupJSON }
	e.get("/api/v1/groups", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 3 || l.Items[0].Count != 45 || l.Items[1].Count != 4 || l.Items[2].Count != 1 {
		t.Fatalf("groups %+v", l.Items)
	}
	if len(l.Items[0].Queues) != 2 || !quarantine.ValidID(l.Items[0].ExampleID) || l.Items[0].JobName != "charge" {
		t.Fatalf("largest group %+v", l.Items[0])
	}
	e.get("/api/v1/groups?queue=orders.x", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Count != 5 {
		t.Fatalf("filtered groups %+v", l.Items)
	}
	e.get("/api/v1/groups?limit=2", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 2 {
		t.Fatalf("limit 2: %d groups", len(l.Items))
	}
	orders := e.token("orders-viewer", quarantine.RoleViewer, "orders")
	e.get("/api/v1/groups", orders).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Count != 5 {
		t.Fatalf("scoped groups %+v", l.Items)
	}
}

type queueJSON struct {
	Queue               string           `json:"queue"`
	Owner               string           `json:"owner"`
	Counts              map[string]int64 `json:"counts"`
	OldestQuarantinedAt *time.Time       `json:"oldest_quarantined_at"`
	OldestAgeSeconds    *float64         `json:"oldest_age_seconds"`
	Inflow5m            int64            `json:"inflow_5m"`
	Inflow24h           int64            `json:"inflow_24h"`
}

func TestQueues(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	e := newEnv(t, withNow(func() time.Time { return now }))
	old := now.Add(-2 * time.Hour)
	e.ingestOK(e.admin, array(envelopeJSON("billing", "a", 1, old), envelopeJSON("billing", "a", 2, now.Add(-time.Minute)),
		envelopeJSON("orders.x", "b", 3, now), envelopeJSON("nobody", "c", 4, now)))
	var l struct{ Items []queueJSON }
	e.get("/api/v1/queues", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 3 {
		t.Fatalf("queues %+v", l.Items)
	}
	billing := l.Items[0]
	if billing.Queue != "billing" || billing.Owner != "payments" || billing.Counts["quarantined"] != 2 || billing.Counts["discarded"] != 0 ||
		len(billing.Counts) != len(quarantine.Statuses) || billing.Inflow24h != 2 {
		t.Fatalf("billing %+v", billing)
	}
	if billing.OldestQuarantinedAt == nil || !billing.OldestQuarantinedAt.Equal(old.Truncate(time.Microsecond)) ||
		billing.OldestAgeSeconds == nil || *billing.OldestAgeSeconds < 7199 || *billing.OldestAgeSeconds > 7201 {
		t.Fatalf("billing oldest %v age %v", billing.OldestQuarantinedAt, billing.OldestAgeSeconds)
	}
	if l.Items[1].Queue != "nobody" || l.Items[1].Owner != "" || l.Items[2].Owner != "orders" {
		t.Fatalf("owners %+v", l.Items)
	}
	payments := e.token("payments-viewer", quarantine.RoleViewer, "payments")
	e.get("/api/v1/queues", payments).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Queue != "billing" {
		t.Fatalf("scoped queues %+v", l.Items)
	}
	e.get("/api/v1/queues?owner=orders", payments).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 0 {
		t.Fatalf("scoped queues of another owner %+v", l.Items)
	}
}
