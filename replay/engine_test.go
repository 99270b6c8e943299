package replay_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/memory"
	"github.com/quarantine-dev/quarantine/replay"
)

// fast is a request whose rate does not slow a test down.
func fast() quarantine.ReplayRequest {
	return quarantine.ReplayRequest{Rate: 10000, Burst: 500}
}

func TestReplayPublishesThePinnedSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(20)
	b := f.create(ids[:15], fast())
	later := f.insert(1) // arrives after the batch was created: never in it
	f.engine(replay.Config{})
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 15 || done.Done() != 15 {
		t.Fatalf("counts = %v, want 15 published", done.Counts)
	}
	got := f.broker.Messages("orders")
	if len(got) != 15 {
		t.Fatalf("broker holds %d messages, want 15", len(got))
	}
	seen := map[string]bool{}
	for _, m := range got {
		id := m.Headers[replay.HeaderOriginalID]
		if seen[id] {
			t.Fatalf("message %s published twice", id)
		}
		seen[id] = true
		orig, err := f.store.GetMessage(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if orig.Status != quarantine.StatusReplayed || orig.ReplayCount != 1 {
			t.Errorf("message %s is %s with replay_count %d, want replayed, 1", id, orig.Status, orig.ReplayCount)
		}
		switch {
		case m.IdempotencyKey != orig.IdempotencyKey || m.Headers[replay.HeaderIdempotencyKey] != orig.IdempotencyKey:
			t.Errorf("idempotency key %q / header %q, want %q", m.IdempotencyKey, m.Headers[replay.HeaderIdempotencyKey], orig.IdempotencyKey)
		case string(m.Payload) != string(orig.Payload) || m.ContentType != "application/json":
			t.Errorf("payload %q (%s), want %q", m.Payload, m.ContentType, orig.Payload)
		case m.Headers[replay.HeaderReplayID] != b.ID || m.Headers[replay.HeaderReplayedBy] != "token:alice":
			t.Errorf("replay headers %v", m.Headers)
		case m.Headers["x-trace"] != orig.Headers["x-trace"]:
			t.Errorf("x-trace %q, want the original %q", m.Headers["x-trace"], orig.Headers["x-trace"])
		case m.MessageID == orig.MessageID || m.MessageID == "":
			t.Errorf("transport message id %q is not fresh (original %q)", m.MessageID, orig.MessageID)
		}
		for _, h := range []string{"Authorization", "x-death", "x-first-death-queue", "Nats-Msg-Id",
			"__connect.errors.topic", "kafka_dlt-original-offset"} {
			if _, ok := m.Headers[h]; ok {
				t.Errorf("header %s was replayed: %v", h, m.Headers)
			}
		}
	}
	for _, id := range append(ids[15:], later...) {
		if seen[id] {
			t.Errorf("message %s was not in the batch but was published", id)
		}
	}
	for _, it := range f.items(b.ID) {
		if it.Outcome != quarantine.ItemPublished || it.Destination != "memory:rmq/orders" || it.PublishedAt == nil {
			t.Errorf("item %+v", it)
		}
		if len(it.DroppedHeaders) != 1 || it.DroppedHeaders[0] != "Authorization" {
			t.Errorf("item %d dropped headers %v, want [Authorization]", it.Seq, it.DroppedHeaders)
		}
	}
	f.verifyAudit()
}

// windows returns the largest number of arrivals within any window of
// length w.
func maxInWindow(at []time.Time, w time.Duration) int {
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	best, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func arrivals(ms []memory.Message) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = m.At
	}
	return out
}

func TestReplayNeverAboveItsRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(90)
	// Two batches to one destination share its budget; two engines on one
	// store share both.
	b1 := f.create(ids[:45], quarantine.ReplayRequest{Rate: 20, Burst: 2})
	b2 := f.create(ids[45:], quarantine.ReplayRequest{Rate: 20, Burst: 2})
	f.engine(replay.Config{})
	f.engine(replay.Config{})
	start := time.Now()
	// The limits only bound a failing test. Chunks of one (burst 2) make
	// 180 write transactions on SQLite: 4.5 s of rate, but under -race on
	// a loaded 2-core machine passing runs took 18-28 s and one needed
	// more than 30 (43 of 45 published, nothing logged as failing).
	f.waitState(b1.ID, 90*time.Second, quarantine.ReplayCompleted)
	f.waitState(b2.ID, 90*time.Second, quarantine.ReplayCompleted)
	took := time.Since(start)
	t.Logf("90 messages in %s", took)
	got := f.broker.Messages("orders")
	if len(got) != 90 {
		t.Fatalf("%d published, want 90", len(got))
	}
	if n := maxInWindow(arrivals(got), time.Second); n > 20+2 {
		t.Errorf("%d messages arrived within one second; the rate is 20/s with burst 2", n)
	}
	// 90 messages at 20/s, 2 at once: at least (90-2)/20 s.
	if min := 88 * time.Second / 20; took < min {
		t.Errorf("90 messages took %s, less than %s allowed by the rate", took, min)
	}
}

// Slots taken ahead of time are published at, never before, their time.
func TestReplayPublishesAtItsSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(12)
	// Two batches at 2/s to one destination: its schedule, 2/s for both,
	// has a slot every 500 ms, each taken (chunks of one) up to its lead
	// ahead of it. Each batch gets about 1/s, half its own rate, so that
	// only the wait for the slot keeps a message from arriving early
	// (with one batch its own schedule would pace it as well, and this
	// test would not notice the wait missing).
	b1 := f.create(ids[:6], quarantine.ReplayRequest{Rate: 2, Burst: 2})
	b2 := f.create(ids[6:], quarantine.ReplayRequest{Rate: 2, Burst: 2})
	f.engine(replay.Config{})
	f.waitState(b1.ID, 60*time.Second, quarantine.ReplayCompleted)
	f.waitState(b2.ID, 60*time.Second, quarantine.ReplayCompleted)
	slots, ahead := f.obs.granted()
	if ahead == 0 {
		t.Fatal("no slots taken before they were due: nothing was tested")
	}
	// Each message published at or after a slot of its own: the k-th
	// arrival is not before the k-th slot granted (slots granted and not
	// used only come earlier).
	got := arrivals(f.broker.Messages("orders"))
	slices.SortFunc(got, time.Time.Compare)
	if len(got) > len(slots) {
		t.Fatalf("%d messages published on %d slots", len(got), len(slots))
	}
	for k, at := range got {
		if at.Before(slots[k]) {
			t.Errorf("message %d arrived %s before the %d-th slot", k, slots[k].Sub(at), k)
		}
	}
	t.Logf("%d grants ahead of their slots; %d arrivals on %d slots", ahead, len(got), len(slots))
}

func TestReplayCanaryHaltsWhenItsMessagesRefail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(20)
	f.broker.OnPublish(func(m memory.Message) { f.refail(m) })
	b := f.create(ids, quarantine.ReplayRequest{Rate: 1000, Canary: 3, Observe: 5 * time.Second})
	f.engine(replay.Config{})
	halted := f.waitState(b.ID, 10*time.Second, quarantine.ReplayHalted)
	if halted.CanaryVerdict != quarantine.CanaryFailed || halted.StateReason == "" {
		t.Errorf("verdict %q, reason %q", halted.CanaryVerdict, halted.StateReason)
	}
	if n := len(f.broker.Messages("orders")); n != 3 {
		t.Errorf("%d messages published, want only the 3 of the canary", n)
	}
	if halted.Counts[quarantine.ItemPending] != 17 || halted.Counts[quarantine.ItemRefailed] == 0 {
		t.Errorf("counts %v: want 17 pending and refailed canary items", halted.Counts)
	}
	for _, it := range f.items(b.ID)[:3] {
		if it.Outcome == quarantine.ItemRefailed && !quarantine.ValidID(it.RefailID) {
			t.Errorf("refailed item without the new entry's id: %+v", it)
		}
	}
	f.verifyAudit()
}

func TestReplayCanaryPassesThenPublishesTheRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(10)
	b := f.create(ids, quarantine.ReplayRequest{Rate: 1000, Burst: 100, Canary: 2, Observe: 300 * time.Millisecond})
	f.engine(replay.Config{})
	// Until the observation ends, only the canary is out.
	if _, err := f.broker.Wait(ctxTimeout(t, 5*time.Second), "orders", 2); err != nil {
		t.Fatal(err)
	}
	canaryDone := time.Now()
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	got := f.broker.Messages("orders")
	if len(got) != 10 || done.CanaryVerdict != quarantine.CanaryPassed {
		t.Fatalf("%d published, verdict %q", len(got), done.CanaryVerdict)
	}
	if gap := got[2].At.Sub(got[1].At); gap < 250*time.Millisecond {
		t.Errorf("the third message followed the canary after %s, before the 300ms observation ended (canary done %s)", gap, canaryDone)
	}
}

func TestReplayBreakerPausesARunningBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(60)
	var n atomic.Int64
	f.broker.OnPublish(func(m memory.Message) {
		if n.Add(1)%2 == 0 { // half of them fail again
			f.refail(m)
		}
	})
	b := f.create(ids, quarantine.ReplayRequest{Rate: 40, Burst: 4, HaltRefailRatio: 0.2})
	f.engine(replay.Config{})
	paused := f.waitState(b.ID, 20*time.Second, quarantine.ReplayPaused)
	if paused.Counts[quarantine.ItemPending] == 0 {
		t.Errorf("the breaker let every item through: %v", paused.Counts)
	}
	if paused.StateReason == "" || paused.Counts[quarantine.ItemRefailed] < 2 {
		t.Errorf("paused with reason %q and counts %v", paused.StateReason, paused.Counts)
	}
	f.verifyAudit()
}

func TestReplayBrokerOutageLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(30)
	f.broker.SetDown(true)
	b := f.create(ids, fast())
	f.engine(replay.Config{})
	// The engine tries, and fails, three times: each failed publish gives
	// its leases back.
	tried := f.obs.wait(t, 30*time.Second, "three publishes given back", func(o observation) bool { return o.Releases >= 3 })
	mid, err := f.store.GetReplay(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != quarantine.ReplayRunning || mid.Counts[quarantine.ItemPending] != 30 || tried.Results != 0 {
		t.Fatalf("during the outage: %s %v, %d results recorded, want running with 30 pending and none", mid.State, mid.Counts, tried.Results)
	}
	if n := len(f.broker.Messages("orders")); n != 0 {
		t.Fatalf("the broker is down, yet holds %d messages", n)
	}
	f.broker.SetDown(false)
	done := f.waitState(b.ID, 40*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 30 || len(f.broker.Messages("orders")) != 30 {
		t.Fatalf("after the outage: %v, broker holds %d", done.Counts, len(f.broker.Messages("orders")))
	}
}

func TestReplayMissingQueueFailsOnlyItsItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(10)
	r := fast()
	r.Destination.Queue = "nowhere"
	bad := f.create(ids[:4], r)
	good := f.create(ids[4:], fast())
	f.engine(replay.Config{})
	// Nothing of the bad batch reached a queue: it ends failed, never
	// completed (which would read as a success).
	b := f.waitState(bad.ID, 10*time.Second, quarantine.ReplayFailed)
	g := f.waitState(good.ID, 10*time.Second, quarantine.ReplayCompleted)
	if b.Counts[quarantine.ItemFailed] != 4 || g.Counts[quarantine.ItemPublished] != 6 {
		t.Fatalf("counts %v and %v", b.Counts, g.Counts)
	}
	if b.StateReason != "every item failed (4 of 4): nothing was published" || g.StateReason != "" {
		t.Fatalf("state reasons %q and %q", b.StateReason, g.StateReason)
	}
	for _, it := range f.items(bad.ID) {
		if it.Reason == "" {
			t.Errorf("failed item without a reason: %+v", it)
		}
		m, _ := f.store.GetMessage(context.Background(), it.MessageID)
		if m.Status != quarantine.StatusQuarantined {
			t.Errorf("a failed item's message is %s, want quarantined again", m.Status)
		}
	}
}

func TestReplayPauseResumeCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(40)
	b := f.create(ids, quarantine.ReplayRequest{Rate: 20, Burst: 1})
	f.engine(replay.Config{})
	ctx := context.Background()
	if _, err := f.broker.Wait(ctxTimeout(t, 5*time.Second), "orders", 3); err != nil {
		t.Fatal(err)
	}
	change := func(action string) *quarantine.ReplayBatch {
		t.Helper()
		out, err := f.store.ChangeReplay(ctx, quarantine.ReplayChange{BatchID: b.ID, Action: action, Actor: "token:bob", Reason: "test " + action})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// A lease taken before the pause may still be published and
	// recorded; once nothing leased is on its way, a lease taken from
	// now on was asked after the pause.
	change(quarantine.ReplayActPause)
	quiet := f.obs.wait(t, 10*time.Second, "quiet after the pause", observation.quiet)
	n := len(f.broker.Messages("orders"))
	// Ten scans of the engine later (the batch is not runnable: no
	// worker starts for it, and one still running may lease nothing),
	// nothing more was leased or published.
	later := f.obs.wait(t, 10*time.Second, "ten scans after the pause", func(o observation) bool { return o.Scans >= quiet.Scans+10 })
	if m := len(f.broker.Messages("orders")); m != n || later.Granted != quiet.Granted {
		t.Fatalf("paused, yet %d more messages were published and %d items leased over ten scans", m-n, later.Granted-quiet.Granted)
	}
	if n == 40 {
		t.Fatalf("every message was published before the pause")
	}
	change(quarantine.ReplayActResume)
	if _, err := f.broker.Wait(ctxTimeout(t, 5*time.Second), "orders", n+3); err != nil {
		t.Fatal(err)
	}
	cancelled := change(quarantine.ReplayActCancel)
	// What was leased before the cancel lands and is recorded (published,
	// so replayed); every other item is skipped.
	f.obs.wait(t, 10*time.Second, "quiet after the cancel", observation.quiet)
	published := len(f.broker.Messages("orders"))
	items := f.items(b.ID)
	counts := map[quarantine.ItemOutcome]int{}
	for _, it := range items {
		counts[it.Outcome]++
		m, err := f.store.GetMessage(ctx, it.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		want := quarantine.StatusReplayed
		if it.Outcome == quarantine.ItemSkipped {
			want = quarantine.StatusQuarantined
		}
		if m.Status != want {
			t.Errorf("item %d (%s): message is %s, want %s", it.Seq, it.Outcome, m.Status, want)
		}
	}
	if counts[quarantine.ItemPublished] != published || counts[quarantine.ItemPublished]+counts[quarantine.ItemSkipped] != 40 {
		t.Errorf("cancelled %s: outcomes %v, broker holds %d", cancelled.State, counts, published)
	}
	f.verifyAudit()
}

// slowOnce blocks its first Publish until released, then publishes.
type slowOnce struct {
	replay.Publisher
	once    sync.Once
	release chan struct{}
	blocked chan struct{}
}

func (s *slowOnce) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.blocked)
		<-s.release
	}
	return s.Publisher.Publish(ctx, msgs)
}

func TestReplayZombieCannotRecordAnItemTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(1)
	b := f.create(ids, fast())
	slow := &slowOnce{Publisher: f.broker, release: make(chan struct{}), blocked: make(chan struct{})}
	zombie := &replay.Routes{Brokers: map[string]replay.Broker{"rmq": {Name: "rmq", Kind: "memory", Publisher: slow}}}
	zst := observe(f.store)
	// One worker: the zombie's other worker would take the item over
	// itself.
	f.engine(replay.Config{Store: zst, Router: zombie, Lease: time.Second, Workers: 1})
	<-slow.blocked // the zombie holds the lease, then stalls past it
	f.engine(replay.Config{Lease: time.Second})
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	close(slow.release) // the zombie wakes, publishes, and tries to record
	if _, err := f.broker.Wait(ctxTimeout(t, 5*time.Second), "orders", 2); err != nil {
		t.Fatal(err)
	}
	z := zst.wait(t, 10*time.Second, "the zombie's result recorded or refused", func(o observation) bool { return o.Results >= 1 })
	if z.Results != 1 || z.Stale != 1 {
		t.Errorf("the zombie sent %d results, %d refused; want its one result refused", z.Results, z.Stale)
	}
	items := f.items(b.ID)
	if len(items) != 1 || items[0].Outcome != quarantine.ItemPublished || items[0].Attempts != 2 {
		t.Fatalf("items %+v, want one published item leased twice", items)
	}
	again, _ := f.store.GetReplay(context.Background(), b.ID)
	if again.FinishedAt == nil || !again.FinishedAt.Equal(*done.FinishedAt) || again.UpdatedAt != done.UpdatedAt {
		t.Errorf("the zombie changed the batch after it completed: %+v then %+v", done, again)
	}
	// At most one extra publish, with the same idempotency key.
	got := f.broker.Messages("orders")
	if got[0].IdempotencyKey != got[1].IdempotencyKey || got[0].MessageID != got[1].MessageID {
		t.Errorf("the republish changed key or transport id: %+v / %+v", got[0].Outgoing, got[1].Outgoing)
	}
	m, _ := f.store.GetMessage(context.Background(), ids[0])
	if m.ReplayCount != 1 {
		t.Errorf("replay_count %d, want 1: the zombie's result must not be recorded", m.ReplayCount)
	}
}

func TestReplayDraftExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(2)
	r := fast()
	r.DryRun = true
	r.DraftTTL = time.Millisecond
	b := f.create(ids, r)
	f.engine(replay.Config{}) // its scans expire the draft once 1ms has passed
	f.waitState(b.ID, 5*time.Second, quarantine.ReplayExpired)
	if n := len(f.broker.Messages("orders")); n != 0 {
		t.Errorf("an expired draft published %d messages", n)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestReplayWakeStartsABatchBeforeThePoll(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(5)
	// A poll that never comes within the test: only the first scan (at
	// Run) and Wake make the engine look for batches.
	e := f.engine(replay.Config{Poll: time.Hour})
	f.obs.wait(t, 10*time.Second, "the engine's first scan", func(o observation) bool { return o.Scans >= 1 })
	b := f.create(ids, fast())
	e.Wake()
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 5 || len(f.broker.Messages("orders")) != 5 {
		t.Fatalf("counts %v, %d published, want 5", done.Counts, len(f.broker.Messages("orders")))
	}
	if o := f.obs.now(); o.Scans != 2 {
		t.Errorf("%d scans, want 2 (the first and the woken one)", o.Scans)
	}
}

// flakyRecords fails the first n RecordReplayResults calls as a busy
// store does, writing nothing.
type flakyRecords struct {
	*observed
	mu sync.Mutex
	n  int
}

func (f *flakyRecords) RecordReplayResults(ctx context.Context, results []quarantine.ReplayResult) ([]int, error) {
	f.mu.Lock()
	fail := f.n > 0
	if fail {
		f.n--
	}
	f.mu.Unlock()
	if fail {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "the database is busy")
	}
	return f.observed.RecordReplayResults(ctx, results)
}

// A record the store refuses for a moment (busy, briefly away) is tried
// again while the lease lasts: what was published is recorded once, not
// published again after the lease (a race run on a loaded machine had a
// record time out and its item published twice).
func TestReplayRetriesARecordWhileItsLeaseLasts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(20)
	b := f.create(ids, quarantine.ReplayRequest{Rate: 1000, Burst: 100})
	f.engine(replay.Config{Store: &flakyRecords{observed: f.obs, n: 2}, Lease: time.Minute})
	// Well within the lease: without the retries the items would wait
	// for it to end.
	f.waitState(b.ID, 30*time.Second, quarantine.ReplayCompleted)
	if got := len(f.broker.Messages("orders")); got != len(ids) {
		t.Fatalf("%d published for %d messages", got, len(ids))
	}
}

// A destination that refuses messages for now (a nack, a full queue) gets
// them again after a backoff: fewer refusals than the publish attempts
// lose nothing, and each item remembers how often it was refused.
func TestReplayRefusedMessagesAreOfferedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(20)
	f.broker.Refuse("orders", 50) // every item refused 2 or 3 times (chunks of 20)
	b := f.create(ids, fast())
	f.engine(replay.Config{PublishAttempts: 5, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	done := f.waitState(b.ID, 30*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 20 || len(f.broker.Messages("orders")) != 20 {
		t.Fatalf("counts %v, broker holds %d; want all 20 published once", done.Counts, len(f.broker.Messages("orders")))
	}
	refusals := 0
	for _, it := range f.items(b.ID) {
		// A lease may also be given back unrefused (its destination held
		// by another worker's refusal), so attempts may exceed refusals+1.
		if it.Refusals < 1 || it.Refusals > 4 || it.Attempts < it.Refusals+1 {
			t.Errorf("item %d: %d refusals in %d attempts; want 1-4, each followed by one more lease", it.Seq, it.Refusals, it.Attempts)
		}
		refusals += it.Refusals
	}
	if refusals != 50 {
		t.Errorf("%d refusals recorded, the broker refused 50", refusals)
	}
}

// An item refused at every offer fails after the engine's publish
// attempts, with the refusal as its reason, and its message is back in
// the quarantine; nothing was published.
func TestReplayRefusedTooOftenFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(6)
	f.broker.Refuse("orders", -1)
	b := f.create(ids, fast())
	f.engine(replay.Config{PublishAttempts: 3, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	done := f.waitState(b.ID, 30*time.Second, quarantine.ReplayFailed)
	if done.Counts[quarantine.ItemFailed] != 6 || len(f.broker.Messages("orders")) != 0 {
		t.Fatalf("counts %v, broker holds %d; want 6 failed, none published", done.Counts, len(f.broker.Messages("orders")))
	}
	for _, it := range f.items(b.ID) {
		if it.Attempts < 3 || it.Refusals != 2 || !strings.Contains(it.Reason, "refused 3 times") || !strings.Contains(it.Reason, "full") {
			t.Errorf("item %+v: want 3 offers (a lease may also be given back unrefused), 2 refusals counted before the last, and the refusal as its reason", it)
		}
		m, err := f.store.GetMessage(context.Background(), it.MessageID)
		if err != nil || m.Status != quarantine.StatusQuarantined {
			t.Errorf("message %s: %v, %v; want quarantined again", it.MessageID, m, err)
		}
	}
}

// A broker that cannot be reached spends no publish attempt: with one
// attempt, an outage still ends with every item published.
func TestReplayOutageSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(10)
	f.broker.SetDown(true)
	b := f.create(ids, fast())
	f.engine(replay.Config{PublishAttempts: 1, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	f.obs.wait(t, 30*time.Second, "three publishes given back", func(o observation) bool { return o.Releases >= 3 })
	f.broker.SetDown(false)
	done := f.waitState(b.ID, 40*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 10 {
		t.Fatalf("counts %v; want all 10 published", done.Counts)
	}
	for _, it := range f.items(b.ID) {
		if it.Refusals != 0 {
			t.Errorf("item %d counts %d refusals for an outage", it.Seq, it.Refusals)
		}
	}
}

// A batch some of whose items failed completes, saying how many failed
// (one all of whose items failed ends failed: TestReplayRefusedTooOftenFails);
// a canary message that cannot be published fails the canary and halts
// the batch before the rest is published.
func TestReplayFailuresAreNeverShownAsSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.insert(10)
	b := f.create(ids[:5], fast())
	r := fast()
	r.Destination.Queue = "nowhere"
	r.Canary = 2
	r.Observe = time.Hour
	canary := f.create(ids[5:], r)
	f.broker.Refuse("orders", 2) // with one attempt, 2 of the 5 fail
	f.engine(replay.Config{PublishAttempts: 1})
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 3 || done.Counts[quarantine.ItemFailed] != 2 || done.StateReason != "2 of 5 items failed" {
		t.Fatalf("a batch with failures: %v %q; want completed, saying 2 of 5 failed", done.Counts, done.StateReason)
	}
	halted := f.waitState(canary.ID, 10*time.Second, quarantine.ReplayHalted)
	if halted.CanaryVerdict != quarantine.CanaryFailed || halted.Counts[quarantine.ItemFailed] != 2 || halted.Counts[quarantine.ItemPending] != 3 ||
		!strings.Contains(halted.StateReason, "2 of its 2 messages could not be published") {
		t.Fatalf("canary batch: %s %s %v %q; want halted with a failed canary and the rest pending", halted.State, halted.CanaryVerdict, halted.Counts, halted.StateReason)
	}
}

// connectingBroker is the in-memory broker as a replay.Connector: it
// notes whether Connect came before the first Publish.
type connectingBroker struct {
	*memory.Broker
	mu                   sync.Mutex
	connects, publishes  int
	connectedBeforeFirst bool
}

func (c *connectingBroker) Connect(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connects++
	return nil
}

func (c *connectingBroker) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	c.mu.Lock()
	if c.publishes == 0 {
		c.connectedBeforeFirst = c.connects > 0
	}
	c.publishes++
	c.mu.Unlock()
	return c.Broker.Publish(ctx, msgs)
}

// A publisher that can connect ahead (replay.Connector, as RabbitMQ's) is
// connected before the engine takes its destination's first slots: the
// slots then need no lead for its connection.
func TestReplayConnectsAPublisherBeforeItsFirstSlots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cb := &connectingBroker{Broker: f.broker}
	f.routes.Brokers["rmq"] = replay.Broker{Name: "rmq", Kind: "memory", Publisher: cb}
	b := f.create(f.insert(30), fast())
	f.engine(replay.Config{})
	done := f.waitState(b.ID, 10*time.Second, quarantine.ReplayCompleted)
	if done.Counts[quarantine.ItemPublished] != 30 {
		t.Fatalf("counts = %v, want 30 published", done.Counts)
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if !cb.connectedBeforeFirst {
		t.Fatalf("not connected before the first publish (%d connects)", cb.connects)
	}
}
