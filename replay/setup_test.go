package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// fixture is a real SQLite store, an in-memory broker with queue
// "orders", and a router sending collector "rmq"'s messages to it.
type fixture struct {
	t      testing.TB
	store  *sqlite.Store
	obs    *observed // the store as the engines see it (engine's default)
	broker *memory.Broker
	routes *replay.Routes
	n      int // messages inserted so far
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := memory.New("orders")
	return &fixture{t: t, store: st, obs: observe(st), broker: b, routes: &replay.Routes{Brokers: map[string]replay.Broker{
		"rmq": {Name: "rmq", Kind: "memory", Publisher: b},
	}}}
}

// insert stores n quarantined messages of queue orders collected by rmq,
// with keys key-0…, and returns their ids in order.
func (f *fixture) insert(n int) []string {
	f.t.Helper()
	msgs := make([]*quarantine.Message, n)
	for j := range msgs {
		i := f.n + j
		msgs[j] = &quarantine.Message{
			Source: "rmq", SourceKind: quarantine.SourceRabbitMQ, Queue: "orders", JobName: "charge",
			MessageID: fmt.Sprintf("m-%d", i), IdempotencyKey: fmt.Sprintf("key-%d", i), KeyRule: quarantine.KeyRuleEnvelope,
			FailureClass: quarantine.ClassExhausted, Reason: "timeout",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), ContentType: "application/json",
			Headers: map[string]string{
				"x-trace": fmt.Sprintf("t-%d", i), "Authorization": replay.RedactedValue,
				"x-death": "[...]", "x-first-death-queue": "orders", "Nats-Msg-Id": "old",
				"__connect.errors.topic": "orders", "kafka_dlt-original-offset": "7",
			},
			DedupeKey: fmt.Sprintf("d-%d", i),
		}
	}
	f.n += n
	res, err := f.store.InsertBatch(context.Background(), msgs)
	if err != nil {
		f.t.Fatal(err)
	}
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// create starts (or drafts) a batch of ids with r's settings.
func (f *fixture) create(ids []string, r quarantine.ReplayRequest) *quarantine.ReplayBatch {
	f.t.Helper()
	r.IDs = ids
	if r.Reason == "" {
		r.Reason = "dependency fixed"
	}
	if r.Actor == "" {
		r.Actor = "token:alice"
	}
	if err := r.Validate(0); err != nil {
		f.t.Fatal(err)
	}
	b, err := f.store.CreateReplay(context.Background(), r, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// engine starts an engine on the fixture until the test ends. Its store
// is f.obs unless cfg names one (an observe(f.store) of its own, to wait
// on what that engine alone did).
func (f *fixture) engine(cfg replay.Config) *replay.Engine {
	f.t.Helper()
	if cfg.Store == nil {
		cfg.Store = f.obs
	}
	if cfg.Router == nil {
		cfg.Router = f.routes
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	e := replay.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = e.Run(ctx)
	}()
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	return e
}

// waitState waits until the batch is in one of states, and returns it.
func (f *fixture) waitState(id string, timeout time.Duration, states ...quarantine.ReplayState) *quarantine.ReplayBatch {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := f.store.GetReplay(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, s := range states {
			if b.State == s {
				return b
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("replay %s is %s (%v) after %s, want one of %v", id, b.State, b.Counts, timeout, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// items returns every item of a batch.
func (f *fixture) items(id string) []quarantine.ReplayItem {
	f.t.Helper()
	var out []quarantine.ReplayItem
	after := -1
	for {
		page, more, err := f.store.ListReplayItems(context.Background(), quarantine.ReplayItemFilter{BatchID: id, After: after, Limit: quarantine.MaxLimit})
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

// refail stores a new dead letter with the same idempotency key as the
// published message m: the worker downstream failed it again.
func (f *fixture) refail(m memory.Message) {
	_, err := f.store.InsertBatch(context.Background(), []*quarantine.Message{{
		Source: "rmq", SourceKind: quarantine.SourceRabbitMQ, Queue: "orders", JobName: m.JobName,
		MessageID: m.MessageID, IdempotencyKey: m.IdempotencyKey, FailureClass: quarantine.ClassPermanent,
		Reason: "still broken", Payload: m.Payload, DedupeKey: "refail-" + m.MessageID,
	}})
	if err != nil {
		f.t.Error(err)
	}
}

func (f *fixture) verifyAudit() {
	f.t.Helper()
	v, err := f.store.VerifyAudit(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	if !v.OK {
		f.t.Fatalf("audit chain does not verify: %+v", v)
	}
}
