package nats

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// replayMsgs returns n replay messages to subject, numbered from first.
func replayMsgs(run, subject string, first, n int) []replay.Outgoing {
	out := make([]replay.Outgoing, n)
	for i := range out {
		k := first + i
		key := fmt.Sprintf("report:%s:%d", run, k)
		out[i] = replay.Outgoing{
			Queue: subject, MessageID: fmt.Sprintf("rb-%s-%d", run, k), IdempotencyKey: key,
			JobName: "reports.render", ContentType: "application/json",
			Payload: fmt.Appendf(nil, `{"run":%q,"n":%d}`, run, k),
			Headers: map[string]string{
				replay.HeaderReplayID:       "rb-" + run,
				replay.HeaderReplayedBy:     "alice",
				replay.HeaderOriginalID:     fmt.Sprintf("orig-%d", k),
				replay.HeaderIdempotencyKey: key,
				"X-Tenant":                  "acme",
			},
		}
	}
	return out
}

// publisherEnv is an embedded server, a stream capturing STREAM.> and a
// Publisher to the server.
type publisherEnv struct {
	srv    *embedded
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	pub    *Publisher
}

func newPublisherEnv(t *testing.T) *publisherEnv {
	t.Helper()
	srv := startEmbedded(t)
	_, js := jsClient(t, srv.url())
	name := uniq("REPLAY")
	st := newStream(t, js, jetstream.StreamConfig{Name: name, Storage: jetstream.FileStorage})
	p := NewPublisher(Config{URL: srv.url()}, "test", quietLogger())
	t.Cleanup(func() { _ = p.Close() })
	return &publisherEnv{srv: srv, js: js, stream: st, name: name, pub: p}
}

// count returns the messages the stream holds.
func (e *publisherEnv) count(t *testing.T) uint64 {
	t.Helper()
	info, err := e.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func outcomeCounts(res []replay.Result) map[quarantine.ItemOutcome]int {
	c := map[quarantine.ItemOutcome]int{}
	for _, r := range res {
		c[r.Outcome]++
	}
	return c
}

func TestPublishConsumeBack(t *testing.T) {
	t.Parallel()
	e := newPublisherEnv(t)
	msgs := replayMsgs("back", e.name+".reports", 0, 800)
	res := e.pub.Publish(context.Background(), msgs)
	if c := outcomeCounts(res); c[quarantine.ItemPublished] != len(msgs) {
		t.Fatalf("outcomes %v (first %+v)", c, res[0])
	}
	if n := e.count(t); n != uint64(len(msgs)) {
		t.Fatalf("stream holds %d, want %d", n, len(msgs))
	}
	for i, o := range msgs {
		m, err := e.stream.GetMsg(context.Background(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != o.Queue || string(m.Data) != string(o.Payload) {
			t.Fatalf("seq %d: %s %q, want %s %q", i+1, m.Subject, m.Data, o.Queue, o.Payload)
		}
		if got := m.Header.Get(nats.MsgIdHdr); got != o.MessageID {
			t.Fatalf("seq %d: Nats-Msg-Id %q, want %q", i+1, got, o.MessageID)
		}
		if got := m.Header.Get("Content-Type"); got != o.ContentType {
			t.Fatalf("seq %d: Content-Type %q", i+1, got)
		}
		for k, v := range o.Headers {
			if got := m.Header[k]; len(got) != 1 || got[0] != v {
				t.Fatalf("seq %d: header %s = %q, want %q", i+1, k, got, v)
			}
		}
	}
}

func TestPublishNoStreamFailsAlone(t *testing.T) {
	t.Parallel()
	e := newPublisherEnv(t)
	msgs := replayMsgs("nostream", e.name+".reports", 0, 30)
	other := "nostream." + e.name
	for i := 0; i < len(msgs); i += 5 {
		msgs[i].Queue = other
	}
	res := e.pub.Publish(context.Background(), msgs)
	for i, r := range res {
		if msgs[i].Queue == other {
			if r.Outcome != quarantine.ItemFailed || quarantine.ErrorCode(r.Err) != quarantine.ENOTFOUND ||
				!strings.Contains(r.Err.Error(), fmt.Sprintf("no stream captures subject %q", other)) {
				t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
			}
		} else if r.Outcome != quarantine.ItemPublished {
			t.Fatalf("message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	if n := e.count(t); n != 24 {
		t.Fatalf("stream holds %d, want 24", n)
	}
}

func TestPublishDuplicateIsDeduplicated(t *testing.T) {
	t.Parallel()
	e := newPublisherEnv(t)
	msgs := replayMsgs("dup", e.name+".reports", 0, 50)
	if c := outcomeCounts(e.pub.Publish(context.Background(), msgs)); c[quarantine.ItemPublished] != 50 {
		t.Fatalf("first: %v", c)
	}
	// The same items again (a republish after a lost record), plus new ones.
	again := append(msgs[10:20:20], replayMsgs("dup", e.name+".reports", 50, 5)...)
	res := e.pub.Publish(context.Background(), again)
	for i, r := range res {
		want := quarantine.ItemDeduplicated
		if i >= 10 {
			want = quarantine.ItemPublished
		}
		if r.Outcome != want {
			t.Fatalf("message %d: %s %v, want %s", i, r.Outcome, r.Err, want)
		}
	}
	if n := e.count(t); n != 55 {
		t.Fatalf("stream holds %d, want 55", n)
	}
}

func TestPublishServerDownIsPending(t *testing.T) {
	t.Parallel()
	e := newPublisherEnv(t)
	subject := e.name + ".reports"
	if c := outcomeCounts(e.pub.Publish(context.Background(), replayMsgs("down", subject, 0, 10))); c[quarantine.ItemPublished] != 10 {
		t.Fatalf("before: %v", c)
	}
	e.srv.stop()
	msgs := replayMsgs("down", subject, 10, 20)
	for i, r := range e.pub.Publish(context.Background(), msgs) {
		if r.Outcome != quarantine.ItemPending || quarantine.ErrorCode(r.Err) != quarantine.EUNAVAILABLE {
			t.Fatalf("server down, message %d: %s %v", i, r.Outcome, r.Err)
		}
	}
	e.srv.start()
	var res []replay.Result
	for range 100 { // the client reconnects by itself within a few hundred ms
		res = e.pub.Publish(context.Background(), msgs)
		if res[0].Outcome != quarantine.ItemPending {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := outcomeCounts(res); c[quarantine.ItemPublished] != len(msgs) {
		t.Fatalf("after the restart: %v (first %+v)", c, res[0])
	}
	if n := e.count(t); n != 30 {
		t.Fatalf("stream holds %d, want 30", n)
	}
}

func TestPublishConcurrent(t *testing.T) {
	t.Parallel()
	e := newPublisherEnv(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			res := e.pub.Publish(context.Background(), replayMsgs(fmt.Sprint("g", g), e.name+".reports", 0, 200))
			if c := outcomeCounts(res); c[quarantine.ItemPublished] != 200 {
				t.Errorf("goroutine %d: %v", g, c)
			}
		})
	}
	wg.Wait()
	if n := e.count(t); n != 800 {
		t.Fatalf("stream holds %d, want 800", n)
	}
}
