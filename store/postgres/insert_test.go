package postgres_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// msg returns a small message with dedupe key k.
func msg(source, k string) *quarantine.Message {
	return &quarantine.Message{Source: source, Queue: "orders", JobName: "charge", IdempotencyKey: "i-" + k,
		Reason: "boom " + k, Payload: []byte(`{"k":"` + k + `"}`), DedupeKey: k}
}

// TestInsertBatchConcurrentOverlap runs batches that share keys, in
// shuffled orders, at the same time: every key is stored exactly once,
// every result names the stored ID, and no batch deadlocks.
func TestInsertBatchConcurrentOverlap(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	const workers, keys = 6, 300
	results := make([][]quarantine.InsertResult, workers)
	batches := make([][]*quarantine.Message, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		var b []*quarantine.Message
		for _, k := range rng.Perm(keys)[:keys*2/3] {
			b = append(b, msg("src", fmt.Sprintf("k%03d", k)))
		}
		batches[w] = b
		wg.Go(func() {
			res, err := s.InsertBatch(t.Context(), b)
			results[w] = res
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("InsertBatch: %v", err)
		}
	}
	var n int
	if err := s.Pool().QueryRow(t.Context(), "SELECT count(*) FROM messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{} // key -> stored id
	rows, err := s.Pool().Query(t.Context(), "SELECT dedupe_key, id FROM messages")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		stored[k] = id
	}
	if n != len(stored) {
		t.Fatalf("%d rows for %d keys", n, len(stored))
	}
	newCount := map[string]int{}
	for w, b := range batches {
		for i, m := range b {
			r := results[w][i]
			if r.ID != stored[m.DedupeKey] {
				t.Fatalf("batch %d key %s: result ID %s, stored %s", w, m.DedupeKey, r.ID, stored[m.DedupeKey])
			}
			if r.New {
				newCount[m.DedupeKey]++
			}
		}
	}
	for k := range stored {
		if newCount[k] != 1 {
			t.Fatalf("key %s reported new %d times, want exactly once", k, newCount[k])
		}
	}
}

func TestInsertBatchDuplicatesInBatchFirstWins(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	a1, b, a2, a3 := msg("src", "a"), msg("src", "b"), msg("src", "a"), msg("other", "a")
	a2.Reason = "second"
	res, err := s.InsertBatch(t.Context(), []*quarantine.Message{a1, b, a2, a3})
	if err != nil {
		t.Fatal(err)
	}
	want := []quarantine.InsertResult{{ID: a1.ID, New: true}, {ID: b.ID, New: true}, {ID: a1.ID, New: false}, {ID: a3.ID, New: true}}
	if !slices.Equal(res, want) {
		t.Fatalf("results %+v, want %+v", res, want)
	}
	got, err := s.GetMessage(t.Context(), a1.ID)
	if err != nil || got.Reason != a1.Reason {
		t.Fatalf("stored %+v (%v), want the first message of the key", got, err)
	}
	if _, err := s.GetMessage(t.Context(), a2.ID); quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		t.Fatalf("the duplicate was stored: %v", err)
	}
}

// TestPayloadStoredOnce checks where the bytes go: text payloads in
// payload_text, others in payload, never both, and never in messages.
func TestPayloadStoredOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	cases := []struct {
		name    string
		payload []byte
		text    bool
	}{
		{"json", []byte(`{"a":1}`), true},
		{"empty", nil, true},
		{"nul", []byte("a\x00b"), false},
		{"invalid utf-8", []byte{0xff, 'a'}, false},
	}
	for _, c := range cases {
		m := msg("src", c.name)
		m.Payload = c.payload
		if _, err := s.InsertBatch(t.Context(), []*quarantine.Message{m}); err != nil {
			t.Fatal(err)
		}
		var hasBin, hasText bool
		err := s.Pool().QueryRow(t.Context(), `SELECT payload IS NOT NULL, payload_text IS NOT NULL
			FROM payload_versions WHERE message_id = $1 AND version = 1`, m.ID).Scan(&hasBin, &hasText)
		if err != nil || hasText != c.text || hasBin == c.text {
			t.Fatalf("%s: bytes %v text %v (%v), want text=%v and one copy", c.name, hasBin, hasText, err, c.text)
		}
		got, err := s.GetMessage(t.Context(), m.ID)
		if err != nil || !bytes.Equal(got.Payload, c.payload) {
			t.Fatalf("%s: payload %q (%v), want %q", c.name, got.Payload, err, c.payload)
		}
	}
}

// TestHostileValuesNeverInternal sends values PostgreSQL refuses or
// misreads (NUL, invalid UTF-8, LIKE metacharacters, huge keys) through
// every entry point: each is stored, refused as invalid, or not found —
// never an internal error.
func TestHostileValuesNeverInternal(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	hostile := []string{"\x00", "a\x00b", "\xff\xfe", "%", "_", `\`, `\%`, "'; DROP TABLE messages; --", "\u2028", "ü"}
	for _, h := range hostile {
		m := msg(h, h)
		m.Queue, m.JobName, m.Owner, m.Reason, m.IdempotencyKey = h, h, h, h, h
		m.Headers = map[string]string{h: h}
		if _, err := s.InsertBatch(ctx, []*quarantine.Message{m}); err != nil {
			t.Fatalf("InsertBatch %q: %v", h, err)
		}
		checks := map[string]error{}
		_, checks["GetMessage"] = s.GetMessage(ctx, h)
		_, checks["PayloadVersions"] = s.PayloadVersions(ctx, h)
		_, checks["PayloadVersion"] = s.PayloadVersion(ctx, h, 1)
		_, checks["TokenBySecretHash"] = s.TokenBySecretHash(ctx, h)
		checks["RevokeToken"] = s.RevokeToken(ctx, h, h)
		_, checks["ListMessages"] = s.ListMessages(ctx, quarantine.Filter{Queue: []string{h}, Text: h, Owner: []string{h, "x"}})
		_, checks["CountByQueue"] = s.CountByQueue(ctx, quarantine.Filter{JobName: []string{h}, Text: h})
		_, checks["ListAudit"] = s.ListAudit(ctx, quarantine.AuditFilter{Actor: h, Subject: h})
		_, checks["AppendAudit"] = s.AppendAudit(ctx, quarantine.NewAuditEvent(h, h, h, map[string]string{h: h}))
		for what, err := range checks {
			if quarantine.ErrorCode(err) == quarantine.EINTERNAL {
				t.Errorf("%s(%q): %v", what, h, err)
			}
		}
	}
	// A key too large for a btree index is refused as invalid, not internal.
	big := msg("src", string(bytes.Repeat([]byte("k"), 1)))
	rng := rand.New(rand.NewPCG(3, 4))
	raw := make([]byte, 12000)
	for i := range raw {
		raw[i] = 'a' + byte(rng.IntN(26))
	}
	big.DedupeKey = string(raw)
	if _, err := s.InsertBatch(ctx, []*quarantine.Message{big}); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Fatalf("InsertBatch with a 12 kB key = %v, want EINVALID", err)
	}
	v, err := s.VerifyAudit(ctx)
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit after hostile events = %+v, %v", v, err)
	}
}

func TestTextSearchIsLiteralAndCaseInsensitive(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	reasons := []string{"disk 100% full", "disk 1000 full", "rate_limit hit", "ratexlimit hit", `C:\tmp`, "C:/tmp", "ÉCLAIR Timeout"}
	var msgs []*quarantine.Message
	for i, r := range reasons {
		m := msg("src", fmt.Sprint(i))
		m.Reason = r
		msgs = append(msgs, m)
	}
	edited := msg("src", "payload")
	edited.Payload = []byte(`{"note":"Needle In Payload"}`)
	binary := msg("src", "binary")
	binary.Payload = []byte("needle\x00")
	msgs = append(msgs, edited, binary)
	if _, err := s.InsertBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"100%":     {reasons[0]},
		"_limit":   {reasons[2]},
		`:\`:       {reasons[4]},
		"timeout":  {reasons[6]},
		"NEEDLE":   {edited.Reason},
		"no match": nil,
	}
	for q, want := range cases {
		p, err := s.ListMessages(t.Context(), quarantine.Filter{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range p.Messages {
			got = append(got, m.Reason)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Text %q matched %q, want %q", q, got, want)
		}
	}
}
