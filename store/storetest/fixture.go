package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/internal/ops"
	"github.com/quarantine-dev/quarantine/store/internal/search"
)

// baseTime has nanoseconds so that the microsecond truncation is exercised.
var baseTime = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

var fixtureSeq atomic.Int64

// msgOpt changes a fixture message.
type msgOpt func(*quarantine.Message)

// newMsg returns a message with every field set to a distinct, plausible
// value (unique message id, idempotency key and dedupe key), changed by opts.
func newMsg(opts ...msgOpt) *quarantine.Message {
	n := fixtureSeq.Add(1)
	enq := baseTime.Add(-time.Hour)
	first := baseTime.Add(-30 * time.Minute)
	m := &quarantine.Message{
		Source:         "src-a",
		SourceKind:     quarantine.SourceMemory,
		Queue:          "orders",
		JobName:        "send_email",
		MessageID:      fmt.Sprintf("msg-%d", n),
		IdempotencyKey: fmt.Sprintf("idem-%d", n),
		KeyRule:        quarantine.KeyRuleEnvelope,
		SchemaVersion:  "v2",
		Attempts:       5,
		FailureClass:   quarantine.ClassExhausted,
		Reason:         "smtp timeout after 30s",
		Payload:        fmt.Appendf(nil, `{"order_id":"o-%d","amount":12.5}`, n),
		ContentType:    "application/json",
		Headers:        map[string]string{"x-trace-id": fmt.Sprintf("tr-%d", n), "x-retry": "5"},
		EnqueuedAt:     &enq,
		FirstFailedAt:  &first,
		FailedAt:       baseTime.Add(time.Duration(n) * time.Second),
		CollectedAt:    baseTime.Add(time.Duration(n)*time.Second + time.Minute),
		Owner:          "team-a",
		DedupeKey:      fmt.Sprintf("dk-%d", n),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func withSource(s string) msgOpt      { return func(m *quarantine.Message) { m.Source = s } }
func withQueue(q string) msgOpt       { return func(m *quarantine.Message) { m.Queue = q } }
func withOwner(o string) msgOpt       { return func(m *quarantine.Message) { m.Owner = o } }
func withDedupe(k string) msgOpt      { return func(m *quarantine.Message) { m.DedupeKey = k } }
func withIdem(k string) msgOpt        { return func(m *quarantine.Message) { m.IdempotencyKey = k } }
func withReason(r string) msgOpt      { return func(m *quarantine.Message) { m.Reason = r } }
func withPayload(p []byte) msgOpt     { return func(m *quarantine.Message) { m.Payload = p } }
func withFailedAt(t time.Time) msgOpt { return func(m *quarantine.Message) { m.FailedAt = t } }

// insert stores msgs and fails t unless every one is new.
func insert(t *testing.T, s store.Store, msgs ...*quarantine.Message) []quarantine.InsertResult {
	t.Helper()
	res, err := s.InsertBatch(t.Context(), msgs)
	wantOK(t, err, "InsertBatch")
	if len(res) != len(msgs) {
		t.Fatalf("InsertBatch returned %d results for %d messages", len(res), len(msgs))
	}
	for i, r := range res {
		if !r.New || r.ID != msgs[i].ID {
			t.Fatalf("result %d = %+v, want new with ID %s", i, r, msgs[i].ID)
		}
	}
	return res
}

// setStatus moves messages to st with raw SQL (the contract has no status
// method yet) and updates the in-memory copies.
func setStatus(t *testing.T, h Harness, s store.Store, st quarantine.Status, msgs ...*quarantine.Message) {
	t.Helper()
	if len(msgs) == 0 {
		return
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = "'" + m.ID + "'"
		m.Status = st
	}
	h.Exec(t, s, fmt.Sprintf("UPDATE messages SET status = '%s' WHERE id IN (%s)", st, strings.Join(ids, ",")))
}

// insertBulk inserts n messages of queue "bulk", a thousand per batch,
// and returns them.
func insertBulk(t *testing.T, s store.Store, n int) []*quarantine.Message {
	t.Helper()
	all := make([]*quarantine.Message, n)
	for i := range all {
		all[i] = newMsg(withQueue("bulk"))
	}
	for lo := 0; lo < n; lo += 1000 {
		insert(t, s, all[lo:min(lo+1000, n)]...)
	}
	return all
}

// bulkReplay opens a store holding more than two chunks (ops.Chunk) of
// messages of queue "bulk", and returns it, them and a request replaying
// them by filter; it skips t under the race detector.
func bulkReplay(t *testing.T, h Harness) (store.Store, []*quarantine.Message, quarantine.ReplayRequest) {
	if raceEnabled {
		t.Skip("thousands of messages take minutes under the race detector; run without -race")
	}
	s := h.Open(t)
	all := insertBulk(t, s, 2*ops.Chunk+5)
	r := replayReq()
	r.IDs, r.Filter = nil, &quarantine.Filter{Queue: []string{"bulk"}}
	return s, all, r
}

// spreadStatuses makes msgs[i] replayed when i%n is replayedAt and
// discarded when it is discardedAt; the others keep their status.
func spreadStatuses(t *testing.T, h Harness, s store.Store, msgs []*quarantine.Message, n, replayedAt, discardedAt int) {
	t.Helper()
	var replayed, discarded []*quarantine.Message
	for i, m := range msgs {
		switch i % n {
		case replayedAt:
			replayed = append(replayed, m)
		case discardedAt:
			discarded = append(discarded, m)
		}
	}
	setStatus(t, h, s, quarantine.StatusReplayed, replayed...)
	setStatus(t, h, s, quarantine.StatusDiscarded, discarded...)
}

// listAll walks every page of f (limit as given) and returns the messages.
func listAll(t *testing.T, s store.Store, f quarantine.Filter) []*quarantine.Message {
	t.Helper()
	var out []*quarantine.Message
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("ListMessages never ends")
		}
		p, err := s.ListMessages(t.Context(), f)
		wantOK(t, err, "ListMessages")
		out = append(out, p.Messages...)
		if p.Next == nil {
			return out
		}
		f.After = p.Next
	}
}

// matches is the reference model of Filter: what every store must return.
func matches(f quarantine.Filter, m *quarantine.Message) bool {
	in := func(vals []string, v string) bool { return len(vals) == 0 || slices.Contains(vals, v) }
	if !in(f.Queue, m.Queue) || !in(f.JobName, m.JobName) || !in(f.Owner, m.Owner) ||
		!in(f.Source, m.Source) || !in(f.IdempotencyKey, m.IdempotencyKey) || !in(f.Fingerprint, m.Fingerprint) {
		return false
	}
	if len(f.FailureClass) > 0 && !slices.Contains(f.FailureClass, m.FailureClass) {
		return false
	}
	if len(f.Status) > 0 && !slices.Contains(f.Status, m.Status) {
		return false
	}
	if !f.FailedAfter.IsZero() && m.FailedAt.Before(f.FailedAfter) {
		return false
	}
	if !f.FailedBefore.IsZero() && !m.FailedAt.Before(f.FailedBefore) {
		return false
	}
	if f.Text != "" {
		// The definition of package store/internal/search: the case folding
		// of q in that of the reason, the job name or the text payload.
		q := search.Fold(f.Text)
		in := func(v string) bool { return strings.Contains(search.Fold(v), q) }
		text := utf8.Valid(m.Payload) && !bytes.ContainsRune(m.Payload, 0)
		if !in(m.Reason) && !in(m.JobName) && !(text && in(string(m.Payload))) {
			return false
		}
	}
	if c := f.After; c != nil {
		if m.FailedAt.After(c.FailedAt) || (m.FailedAt.Equal(c.FailedAt) && m.ID >= c.ID) {
			return false
		}
	}
	return true
}

// expected returns the IDs of msgs matching f, newest first by (failed_at, id).
func expected(f quarantine.Filter, msgs []*quarantine.Message) []string {
	var sel []*quarantine.Message
	for _, m := range msgs {
		if matches(f, m) {
			sel = append(sel, m)
		}
	}
	sortDesc(sel)
	return ids(sel)
}

// sortDesc orders msgs by (failed_at DESC, id DESC).
func sortDesc(msgs []*quarantine.Message) {
	slices.SortFunc(msgs, func(a, b *quarantine.Message) int {
		if c := b.FailedAt.Compare(a.FailedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

func ids(msgs []*quarantine.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// diffMessage lists the fields in which got differs from want (a message
// as normalised by InsertBatch). Payload bytes are compared when
// withPayload; otherwise got.Payload must be nil.
func diffMessage(want, got *quarantine.Message, withPayload bool) []string {
	var d []string
	eq := func(name string, a, b any) {
		if a != b {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", name, short(b), short(a)))
		}
	}
	eq("ID", want.ID, got.ID)
	eq("Source", want.Source, got.Source)
	eq("SourceKind", want.SourceKind, got.SourceKind)
	eq("Queue", want.Queue, got.Queue)
	eq("JobName", want.JobName, got.JobName)
	eq("MessageID", want.MessageID, got.MessageID)
	eq("IdempotencyKey", want.IdempotencyKey, got.IdempotencyKey)
	eq("SchemaVersion", want.SchemaVersion, got.SchemaVersion)
	eq("Attempts", want.Attempts, got.Attempts)
	eq("FailureClass", want.FailureClass, got.FailureClass)
	eq("Reason", want.Reason, got.Reason)
	eq("PayloadSize", want.PayloadSize, got.PayloadSize)
	eq("ContentType", want.ContentType, got.ContentType)
	eq("PayloadSHA256", want.PayloadSHA256, got.PayloadSHA256)
	eq("PayloadVersion", want.PayloadVersion, got.PayloadVersion)
	eq("Status", want.Status, got.Status)
	eq("Owner", want.Owner, got.Owner)
	eq("Fingerprint", want.Fingerprint, got.Fingerprint)
	eq("ReplayCount", want.ReplayCount, got.ReplayCount)
	eq("RefailOf", want.RefailOf, got.RefailOf)
	eq("KeyRule", want.KeyRule, got.KeyRule)
	for _, tm := range []struct {
		name string
		a, b time.Time
	}{{"FailedAt", want.FailedAt, got.FailedAt}, {"CollectedAt", want.CollectedAt, got.CollectedAt}, {"UpdatedAt", want.UpdatedAt, got.UpdatedAt}} {
		if !tm.a.Equal(tm.b) {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", tm.name, tm.b, tm.a))
		}
	}
	for _, tp := range []struct {
		name string
		a, b *time.Time
	}{{"EnqueuedAt", want.EnqueuedAt, got.EnqueuedAt}, {"FirstFailedAt", want.FirstFailedAt, got.FirstFailedAt}} {
		switch {
		case (tp.a == nil) != (tp.b == nil):
			d = append(d, fmt.Sprintf("%s: got %v, want %v", tp.name, tp.b, tp.a))
		case tp.a != nil && !tp.a.Equal(*tp.b):
			d = append(d, fmt.Sprintf("%s: got %v, want %v", tp.name, *tp.b, *tp.a))
		}
	}
	if !(len(want.Headers) == 0 && len(got.Headers) == 0) && !maps.Equal(want.Headers, got.Headers) {
		d = append(d, fmt.Sprintf("Headers: got %v, want %v", got.Headers, want.Headers))
	}
	if !slices.Equal(want.Flags, got.Flags) && !(len(want.Flags) == 0 && len(got.Flags) == 0) {
		d = append(d, fmt.Sprintf("Flags: got %v, want %v", got.Flags, want.Flags))
	}
	if withPayload {
		if !bytes.Equal(want.Payload, got.Payload) {
			d = append(d, fmt.Sprintf("Payload: got %d bytes %q, want %d bytes %q", len(got.Payload), short(got.Payload), len(want.Payload), short(want.Payload)))
		}
	} else if got.Payload != nil {
		d = append(d, fmt.Sprintf("Payload: got %d bytes, want nil in a list", len(got.Payload)))
	}
	return d
}

// wantSame fails t when got differs from want.
func wantSame(t *testing.T, want, got *quarantine.Message, withPayload bool) {
	t.Helper()
	if d := diffMessage(want, got, withPayload); len(d) > 0 {
		t.Fatalf("message %s differs from what was stored:\n  %s", want.ID, strings.Join(d, "\n  "))
	}
}

func short(v any) string {
	s := fmt.Sprint(v)
	if b, ok := v.([]byte); ok {
		s = string(b)
	}
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
