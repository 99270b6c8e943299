package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// GET /api/v1/alarms lists the stored states (validated against
// openapi.yaml), by alarm and queue, scoped to a token's owners.
func TestAlarmsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var l struct {
		Items []struct {
			Alarm, Queue, Owner, State, Reason string
			Since                              time.Time
			ActiveAt                           *time.Time `json:"active_at"`
			AgeSeconds                         float64    `json:"age_seconds"`
			Depth                              int64
		}
	}
	e.get("/api/v1/alarms", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 0 {
		t.Fatalf("a new store lists alarms %+v", l.Items)
	}
	at := time.Now().UTC().Truncate(time.Second)
	err := e.store.SaveAlarms(t.Context(), []quarantine.AlarmState{
		{Alarm: "age", Queue: "orders.x", Owner: "orders", State: quarantine.AlarmInactive, Since: at},
		{Alarm: "age", Queue: "billing", Owner: "payments", State: quarantine.AlarmFiring, Since: at, ActiveAt: &at,
			AlarmReading: quarantine.AlarmReading{Reason: "the oldest dead letter is 20m0s old (max_age 15m0s)", AgeSeconds: 1200, Depth: 2}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.get("/api/v1/alarms", e.viewer).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 2 || l.Items[0].Queue != "billing" || l.Items[0].State != "firing" || l.Items[0].AgeSeconds != 1200 ||
		l.Items[0].ActiveAt == nil || !l.Items[0].Since.Equal(at) || l.Items[1].Queue != "orders.x" || l.Items[1].ActiveAt != nil {
		t.Fatalf("alarms %+v", l.Items)
	}
	payments := e.token("payments-viewer", quarantine.RoleViewer, "payments")
	e.get("/api/v1/alarms", payments).want(t, http.StatusOK).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Owner != "payments" {
		t.Fatalf("scoped alarms %+v", l.Items)
	}
	e.get("/api/v1/alarms?state=firing", e.viewer).problem(t, http.StatusBadRequest, "state")
	e.get("/api/v1/alarms", "").want(t, http.StatusUnauthorized)
}
