package alert_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/testclock"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// clock is a clock the test moves by hand.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// openSQLite opens a migrated SQLite store on c in a temporary folder.
func openSQLite(t *testing.T, c *clock) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "q.db"), sqlite.WithClock(c.Now))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

var seq atomic.Int64

// deadLetter stores one message of queue that failed age before now and
// returns its id.
func deadLetter(t *testing.T, s store.Store, c *clock, queue string, age time.Duration) string {
	t.Helper()
	n := seq.Add(1)
	at := c.Now().Add(-age)
	m := &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory, Queue: queue, JobName: "job",
		MessageID: fmt.Sprint("m-", n), IdempotencyKey: fmt.Sprint("k-", n), FailureClass: quarantine.ClassExhausted,
		Reason: "boom", Payload: []byte(`{"n":1}`), ContentType: "application/json", FailedAt: at, CollectedAt: at,
		DedupeKey: fmt.Sprint("d-", n)}
	res, err := s.InsertBatch(t.Context(), []*quarantine.Message{m})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res[0].ID
}

// receiver is a real HTTP receiver on 127.0.0.1 that records what it
// accepts, and answers 503 while down.
type receiver struct {
	srv      *httptest.Server
	down     atomic.Bool
	attempts atomic.Int64
	mu       sync.Mutex
	paths    []string
	bodies   [][]byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.attempts.Add(1)
		b, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.bodies = append(r.bodies, b)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// webhooks decodes what a webhook receiver accepted.
func (r *receiver) webhooks(t *testing.T) []alert.WebhookBody {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []alert.WebhookBody
	for _, b := range r.bodies {
		var w alert.WebhookBody
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("webhook body %s: %v", b, err)
		}
		out = append(out, w)
	}
	return out
}

// kinds returns the kinds of what a webhook receiver accepted.
func (r *receiver) kinds(t *testing.T) []string {
	var out []string
	for _, w := range r.webhooks(t) {
		out = append(out, w.Kind)
	}
	return out
}

// ageRule fires on queue orders after 15 minutes, for 1 minute, repeating
// every hour, to the receiver named hook.
func ageRule() alert.Rule {
	return alert.Rule{Name: "orders-age", Queues: []string{"orders"}, MaxAge: 15 * time.Minute, For: time.Minute,
		Repeat: time.Hour, Receivers: []string{"hook"}}
}

func newEvaluator(t *testing.T, s alert.Store, c *clock, rules []alert.Rule, rcv ...alert.Receiver) *alert.Evaluator {
	t.Helper()
	return newEvaluatorWith(t, alert.Config{Store: s, Rules: rules, Receivers: rcv, Now: c.Now})
}

// newEvaluatorWith is newEvaluator with a configuration of the test's
// (orders is owned by payments).
func newEvaluatorWith(t *testing.T, cfg alert.Config) *alert.Evaluator {
	t.Helper()
	cfg.Owner = func(q string) string { return map[string]string{"orders": "payments"}[q] }
	e, err := alert.New(cfg)
	if err != nil {
		t.Fatalf("alert.New: %v", err)
	}
	return e
}

// step runs one evaluation and delivery, failing t on error.
func step(t *testing.T, e *alert.Evaluator) time.Time {
	t.Helper()
	next, err := e.Step(t.Context())
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	return next
}

// stateOf returns the stored state of alarm on queue.
func stateOf(t *testing.T, s store.Store, alarm, queue string) quarantine.AlarmState {
	t.Helper()
	states, err := s.AlarmStates(t.Context())
	if err != nil {
		t.Fatalf("AlarmStates: %v", err)
	}
	for _, st := range states {
		if st.Alarm == alarm && st.Queue == queue {
			return st
		}
	}
	return quarantine.AlarmState{Alarm: alarm, Queue: queue, State: quarantine.AlarmInactive}
}

func wantState(t *testing.T, s store.Store, alarm, queue string, want quarantine.AlarmStatus) {
	t.Helper()
	if st := stateOf(t, s, alarm, queue); st.State != want {
		t.Fatalf("alarm %s on %s is %s (%+v), want %s", alarm, queue, st.State, st, want)
	}
}

func wantKinds(t *testing.T, r *receiver, want ...string) {
	t.Helper()
	got := r.kinds(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("receiver got %v, want %v", got, want)
	}
}

// notFound returns the URL of a receiver that answers 404 to everything.
func notFound(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.URL
}
