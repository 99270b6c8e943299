package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// workerStream makes a work-queue stream of jobs and the worker consumer
// that gives up on a job after maxDeliver deliveries.
func workerStream(t *testing.T, js jetstream.JetStream, maxDeliver int) string {
	t.Helper()
	stream := uniq("JOBS")
	newStream(t, js, jetstream.StreamConfig{Name: stream, Retention: jetstream.WorkQueuePolicy})
	_, err := js.CreateOrUpdateConsumer(context.Background(), stream, jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: maxDeliver,
		FilterSubject: stream + ".jobs", AckWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), captureStreamName(stream, "worker")) })
	return stream
}

func jobBody(i int) []byte { return fmt.Appendf(nil, `{"job":%d,"note":"\u00e9"}`, i) }

// publishJobs publishes jobs first..first+n-1 with an idempotency header.
func publishJobs(t *testing.T, js jetstream.JetStream, stream string, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		msg := &nats.Msg{Subject: stream + ".jobs", Data: jobBody(i),
			Header: nats.Header{"X-Idempotency-Key": {fmt.Sprintf("k-%d", i)}}}
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
}

// work runs the worker until the consumer has nothing left: jobs for
// which ok is true are acknowledged, the others failed (nak) until the
// consumer gives up on them.
func work(t *testing.T, js jetstream.JetStream, stream string, ok func(job int) bool) {
	t.Helper()
	ctx := context.Background()
	c, err := js.Consumer(ctx, stream, "worker")
	if err != nil {
		t.Fatal(err)
	}
	idle := 0
	deadline := time.Now().Add(patience * 60 * time.Second)
	for idle < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never finished")
		}
		b, err := c.Fetch(100, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			var job struct{ Job int }
			_ = json.Unmarshal(m.Data(), &job)
			if ok(job.Job) {
				_ = m.DoubleAck(ctx)
			} else {
				_ = m.Nak()
			}
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && ci.NumPending == 0 && ci.NumAckPending == 0 {
			idle++
		} else {
			idle = 0
		}
	}
}

func never(int) bool { return false }

// assertJobsOnce checks that exactly the jobs in want are stored, once
// each, as given-up originals.
func assertJobsOnce(t *testing.T, st *sqlite.Store, source, stream string, want []int, reason string) {
	t.Helper()
	msgs := allMessages(t, st, source)
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.IdempotencyKey]++
		full, err := st.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		var job struct{ Job int }
		_ = json.Unmarshal(full.Payload, &job)
		if m.Queue != stream+".jobs" || m.FailureClass != quarantine.ClassDeliveryLimit || m.Attempts != 2 ||
			!bytes.Equal(full.Payload, jobBody(job.Job)) || m.IdempotencyKey != fmt.Sprintf("k-%d", job.Job) ||
			!strings.Contains(m.Reason, reason) || m.EnqueuedAt == nil {
			t.Fatalf("stored %+v payload %q", m, full.Payload)
		}
	}
	for _, i := range want {
		if seen[fmt.Sprintf("k-%d", i)] != 1 {
			t.Fatalf("job %d stored %d times", i, seen[fmt.Sprintf("k-%d", i)])
		}
	}
	if len(msgs) != len(want) {
		t.Fatalf("stored %d messages, want %d", len(msgs), len(want))
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

// lostEvents returns the collect.lost events of the store's audit log.
func lostEvents(t *testing.T, st *sqlite.Store) []quarantine.AuditEvent {
	t.Helper()
	evs, err := st.ListAudit(context.Background(), quarantine.AuditFilter{Action: ActionCollectLost, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func appendAudit(st *sqlite.Store) AuditFunc {
	return func(ctx context.Context, e quarantine.AuditEvent) error {
		_, err := st.AppendAudit(ctx, e)
		return err
	}
}

func waitCapture(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	eventually(t, 10*time.Second, "the capture stream", func() bool {
		_, err := js.Consumer(context.Background(), captureStreamName(stream, "worker"), "quarantine-adv")
		return err == nil
	})
}

// TestAdvisoriesCollected: each message the worker consumer gives up on
// is stored once, byte-exact, then deleted from the worker stream; a
// malformed advisory is stored raw and flagged.
func TestAdvisoriesCollected(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		nc, js := jsClient(t, url)
		stream := workerStream(t, js, 2)
		st := openStore(t)
		cfg := Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}, DeleteAfterStore: true}
		r := runCollector(t, "adv", cfg, st, appendAudit(st), 10)
		waitCapture(t, js, stream)

		const n = 30
		publishJobs(t, js, stream, 0, n)
		if err := nc.Publish(AdvisorySubject(stream, "worker"), []byte("not an advisory")); err != nil {
			t.Fatal(err)
		}
		work(t, js, stream, func(job int) bool { return job%3 == 0 })
		var failed []int
		for i := range n {
			if i%3 != 0 {
				failed = append(failed, i)
			}
		}
		eventually(t, 30*time.Second, "every given-up job stored and deleted", func() bool {
			return storedCount(t, st, "adv") >= len(failed)+1 && streamMsgs(t, js, stream) == 0 &&
				consumerDrained(t, js, captureStreamName(stream, "worker"), "quarantine-adv")
		})
		r.stop()
		var bad *quarantine.Message
		for _, m := range allMessages(t, st, "adv") {
			if m.FailureClass == quarantine.ClassMalformed {
				bad = m
			}
		}
		if bad == nil || !bad.HasFlag(quarantine.FlagMalformed) || bad.PayloadSHA256 != quarantine.PayloadHash([]byte("not an advisory")) {
			t.Fatalf("malformed advisory stored as %+v", bad)
		}
		assertJobsOnceExcept(t, st, "adv", stream, failed, "gave up after 2 deliveries", bad.ID)
		if evs := lostEvents(t, st); len(evs) != 0 {
			t.Fatalf("lost events: %+v", evs)
		}
		if streamMsgs(t, js, captureStreamName(stream, "worker")) != 0 {
			t.Fatal("advisories left in the capture stream")
		}
	})
}

// assertJobsOnceExcept is assertJobsOnce ignoring the message skip.
func assertJobsOnceExcept(t *testing.T, st *sqlite.Store, source, stream string, want []int, reason, skip string) {
	t.Helper()
	ctx := context.Background()
	msgs := allMessages(t, st, source)
	seen := map[string]int{}
	for _, m := range msgs {
		if m.ID == skip {
			continue
		}
		seen[m.IdempotencyKey]++
		full, err := st.GetMessage(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		var job struct{ Job int }
		_ = json.Unmarshal(full.Payload, &job)
		if m.Queue != stream+".jobs" || m.FailureClass != quarantine.ClassDeliveryLimit || m.Attempts != 2 ||
			!bytes.Equal(full.Payload, jobBody(job.Job)) || m.IdempotencyKey != fmt.Sprintf("k-%d", job.Job) ||
			!strings.Contains(m.Reason, reason) || m.EnqueuedAt == nil || full.Headers["X-Idempotency-Key"] == "" {
			t.Fatalf("stored %+v payload %q", m, full.Payload)
		}
	}
	for _, i := range want {
		if seen[fmt.Sprintf("k-%d", i)] != 1 {
			t.Fatalf("job %d stored %d times", i, seen[fmt.Sprintf("k-%d", i)])
		}
	}
	if n := len(seen); n != len(want) {
		t.Fatalf("stored %d distinct jobs, want %d", n, len(want))
	}
}

// TestReconcileFindsMissedAdvisories: jobs given up on before the
// collector ever ran (no capture stream: their advisories are gone) are
// found by reconciliation; jobs the worker acknowledged are not taken.
func TestReconcileFindsMissedAdvisories(t *testing.T) {
	t.Parallel()
	servers(t, func(t *testing.T, url string) {
		_, js := jsClient(t, url)
		stream := workerStream(t, js, 2)
		const n = 25
		publishJobs(t, js, stream, 0, n)
		work(t, js, stream, func(job int) bool { return job%2 == 0 })
		var failed []int
		for i := 1; i < n; i += 2 {
			failed = append(failed, i)
		}
		if got := streamMsgs(t, js, stream); got != uint64(len(failed)) {
			t.Fatalf("%d messages left in the work queue, want %d", got, len(failed))
		}
		st := openStore(t)
		cfg := Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}, DeleteAfterStore: true}
		r := runCollector(t, "adv", cfg, st, appendAudit(st), 7)
		eventually(t, 30*time.Second, "reconciliation stored and deleted them", func() bool {
			return storedCount(t, st, "adv") >= len(failed) && streamMsgs(t, js, stream) == 0
		})
		r.stop()
		assertJobsOnce(t, st, "adv", stream, failed, "found by reconciliation")
		if evs := lostEvents(t, st); len(evs) != 0 {
			t.Fatalf("lost events: %+v", evs)
		}
	})
}

// TestAdvisoriesWhileDown: advisories published while the collector is
// down wait in the capture stream; after the restart each job is stored
// once, and reconciliation (which sees the same jobs below the ack floor)
// neither duplicates them nor reports them lost.
func TestAdvisoriesWhileDown(t *testing.T) {
	t.Parallel()
	url := startEmbedded(t).url()
	_, js := jsClient(t, url)
	stream := workerStream(t, js, 2)
	st := openStore(t)
	cfg := Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}, DeleteAfterStore: true}
	r := runCollector(t, "adv", cfg, st, appendAudit(st), 5)
	waitCapture(t, js, stream)
	r.stop()

	const n = 20
	publishJobs(t, js, stream, 0, n)
	work(t, js, stream, never)
	if got := streamMsgs(t, js, captureStreamName(stream, "worker")); got != n {
		t.Fatalf("%d advisories captured, want %d", got, n)
	}
	cfg.ReconcileEvery = MinReconcileEvery // so that passes after the first run within the test
	r = runCollector(t, "adv", cfg, st, appendAudit(st), 5)
	eventually(t, 30*time.Second, "all stored and deleted", func() bool {
		return storedCount(t, st, "adv") >= n && streamMsgs(t, js, stream) == 0 &&
			streamMsgs(t, js, captureStreamName(stream, "worker")) == 0
	})
	waitPasses(t, r, 2) // one more whole pass, started after the jobs were stored
	r.stop()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	assertJobsOnce(t, st, "adv", stream, all, "gave up after 2 deliveries")
	if evs := lostEvents(t, st); len(evs) != 0 {
		t.Fatalf("lost events: %+v", evs)
	}
}

// TestDeletedBeforeFetchIsAudited: a given-up message deleted before the
// collector fetched it is recorded as a collect.lost audit event (retried
// until the audit log takes it), never skipped in silence.
func TestDeletedBeforeFetchIsAudited(t *testing.T) {
	t.Parallel()
	url := startEmbedded(t).url()
	_, js := jsClient(t, url)
	stream := workerStream(t, js, 2)
	st := openStore(t)
	cfg := Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}}
	r := runCollector(t, "adv", cfg, st, appendAudit(st), 5)
	waitCapture(t, js, stream)
	r.stop()

	publishJobs(t, js, stream, 0, 3)
	work(t, js, stream, never)
	ctx := context.Background()
	ws, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	flaky := func(ctx context.Context, e quarantine.AuditEvent) error {
		if calls.Add(1) == 1 {
			return errors.New("audit log unavailable")
		}
		return appendAudit(st)(ctx, e)
	}
	r = runCollector(t, "adv", cfg, st, flaky, 5)
	eventually(t, 30*time.Second, "two stored and one loss recorded", func() bool {
		return storedCount(t, st, "adv") >= 2 && len(lostEvents(t, st)) >= 1 &&
			streamMsgs(t, js, captureStreamName(stream, "worker")) == 0
	})
	r.stop()
	assertJobsOnce(t, st, "adv", stream, []int{0, 2}, "gave up after 2 deliveries")
	evs := lostEvents(t, st)
	if len(evs) != 1 || calls.Load() < 2 {
		t.Fatalf("%d lost events after %d audit calls", len(evs), calls.Load())
	}
	var d lostDetails
	if err := json.Unmarshal(evs[0].Details, &d); err != nil {
		t.Fatal(err)
	}
	if evs[0].Subject != stream+":2" || evs[0].Actor != "collector:adv" || d.Stream != stream || d.Seq != 2 ||
		d.Consumer != "worker" || d.Reason != LostNotFound {
		t.Fatalf("event %+v details %+v", evs[0], d)
	}
	v, err := st.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("audit chain: %+v %v", v, err)
	}
}

// TestReconcileSkipsLimitsStreams: under limits retention acknowledged
// messages stay in the stream, so reconciliation cannot tell them from
// given-up ones and takes none (no false dead letters); advisories still
// flow.
func TestReconcileSkipsLimitsStreams(t *testing.T) {
	t.Parallel()
	url := startEmbedded(t).url()
	_, js := jsClient(t, url)
	stream := uniq("LIMITS")
	newStream(t, js, jetstream.StreamConfig{Name: stream})
	ctx := context.Background()
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 2, FilterSubject: stream + ".jobs",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), captureStreamName(stream, "worker")) })
	publishJobs(t, js, stream, 0, 10)
	work(t, js, stream, func(int) bool { return true }) // all acknowledged: none failed
	st := openStore(t)
	cfg := Config{URL: url, Advisories: &AdvisoryConfig{Stream: stream, Consumer: "worker"}, ReconcileEvery: time.Second}
	r := runCollector(t, "adv", cfg, st, appendAudit(st), 5)
	waitCapture(t, js, stream)
	publishJobs(t, js, stream, 10, 3)
	work(t, js, stream, func(job int) bool { return job != 11 })
	eventually(t, 10*time.Second, "the advisory's job stored", func() bool { return storedCount(t, st, "adv") >= 1 })
	waitPasses(t, r, 2) // one more whole pass, started after the job was stored
	r.stop()
	assertJobsOnce(t, st, "adv", stream, []int{11}, "gave up after 2 deliveries")
}

// waitPasses waits until n more reconciliation passes of r's source have
// returned: with n = 2 at least one whole pass ran after the call.
func waitPasses(tb testing.TB, r *running, n uint64) {
	tb.Helper()
	want := r.src.adv.passes.Load() + n
	eventually(tb, 30*time.Second, fmt.Sprintf("%d more reconciliation passes", n), func() bool { return r.src.adv.passes.Load() >= want })
}
