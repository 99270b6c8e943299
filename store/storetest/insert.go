package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func testInsertBatch(t *testing.T, h Harness) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		full := newMsg()
		full.FailedAt = baseTime.Add(987654321 * time.Nanosecond) // sub-microsecond part is cut
		full.RefailOf = quarantine.NewID(baseTime)
		full.ReplayCount = 2
		full.AddFlag(quarantine.FlagMalformed)
		bare := newMsg(withPayload([]byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80}), withIdem(""))
		bare.EnqueuedAt, bare.FirstFailedAt, bare.Headers = nil, nil, nil
		bare.ContentType = "application/octet-stream"
		res := insert(t, s, full, bare)
		for i, m := range []*quarantine.Message{full, bare} {
			if !quarantine.ValidID(res[i].ID) {
				t.Fatalf("result ID %q is not a valid ID", res[i].ID)
			}
			if m.Status != quarantine.StatusQuarantined || m.PayloadVersion != 1 || m.PayloadSHA256 != quarantine.PayloadHash(m.Payload) {
				t.Fatalf("message not normalised in place: status %q version %d hash %q", m.Status, m.PayloadVersion, m.PayloadSHA256)
			}
			got, err := s.GetMessage(t.Context(), res[i].ID)
			wantOK(t, err, "GetMessage")
			wantSame(t, m, got, true)
			if got.FailedAt.Nanosecond()%1000 != 0 {
				t.Fatalf("FailedAt %v has sub-microsecond digits", got.FailedAt)
			}
			vs, err := s.PayloadVersions(t.Context(), m.ID)
			wantOK(t, err, "PayloadVersions")
			if len(vs) != 1 {
				t.Fatalf("PayloadVersions = %d versions, want 1", len(vs))
			}
			v := vs[0]
			if v.MessageID != m.ID || v.Version != 1 || v.SHA256 != quarantine.PayloadHash(m.Payload) ||
				v.PrevSHA256 != "" || v.Size != len(m.Payload) || v.ContentType != m.ContentType || v.Payload != nil {
				t.Fatalf("version 1 = %+v, want the collected payload's hash and size without bytes", v)
			}
			if v.CreatedAt.IsZero() {
				t.Fatal("version 1 has no CreatedAt")
			}
		}
		if !bare.HasFlag(quarantine.FlagMissingIdempotencyKey) {
			t.Fatalf("message without idempotency key not flagged: %v", bare.Flags)
		}
	})

	t.Run("DedupeWithinAndAcrossBatches", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		a := newMsg(withDedupe("same"))
		a2 := newMsg(withDedupe("same"))
		other := newMsg(withDedupe("same"), withSource("src-b"))
		res, err := s.InsertBatch(t.Context(), []*quarantine.Message{a, a2, other})
		wantOK(t, err, "InsertBatch")
		if !res[0].New || res[1].New || res[1].ID != res[0].ID || res[0].ID != a.ID {
			t.Fatalf("same key twice in one batch: results %+v, want new then old with the first's ID %s", res[:2], a.ID)
		}
		if !res[2].New || res[2].ID == res[0].ID {
			t.Fatalf("same key under another source: result %+v, want a second new message", res[2])
		}
		a3 := newMsg(withDedupe("same"))
		res, err = s.InsertBatch(t.Context(), []*quarantine.Message{a3})
		wantOK(t, err, "InsertBatch")
		if res[0].New || res[0].ID != a.ID {
			t.Fatalf("same key in a later batch: result %+v, want old with ID %s", res[0], a.ID)
		}
		all := listAll(t, s, quarantine.Filter{})
		if len(all) != 2 {
			t.Fatalf("stored %d messages, want 2", len(all))
		}
		got, err := s.GetMessage(t.Context(), a.ID)
		wantOK(t, err, "GetMessage")
		wantSame(t, a, got, true) // the first one wins; later duplicates change nothing
	})

	t.Run("EmptyDedupeKeyUsesPayloadHash", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		p := []byte(`{"same":"payload"}`)
		a := newMsg(withDedupe(""), withPayload(p))
		b := newMsg(withDedupe(""), withPayload(p))
		c := newMsg(withDedupe(""), withPayload([]byte(`{"other":"payload"}`)))
		res, err := s.InsertBatch(t.Context(), []*quarantine.Message{a, b, c})
		wantOK(t, err, "InsertBatch")
		if !res[0].New || res[1].New || res[1].ID != res[0].ID || !res[2].New {
			t.Fatalf("results %+v: want the equal payloads stored once, the other payload stored", res)
		}
		explicit := newMsg(withDedupe(quarantine.PayloadHash(p)), withPayload([]byte("different bytes")))
		res, err = s.InsertBatch(t.Context(), []*quarantine.Message{explicit})
		wantOK(t, err, "InsertBatch")
		if res[0].New || res[0].ID != a.ID {
			t.Fatalf("explicit key equal to the payload hash: %+v, want a duplicate of %s", res[0], a.ID)
		}
	})

	t.Run("ConcurrentOverlapping", func(t *testing.T) { t.Parallel(); testConcurrentInsert(t, h) })

	t.Run("FailedBatchStoresNothing", func(t *testing.T) {
		t.Parallel()
		s := h.Open(t)
		kept := newMsg()
		insert(t, s, kept)

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.InsertBatch(ctx, []*quarantine.Message{newMsg(), newMsg()})
		if err == nil {
			t.Fatal("InsertBatch with a cancelled context succeeded")
		}

		fresh := newMsg()
		clash := newMsg() // a new dedupe key but the ID of a stored message
		clash.ID = kept.ID
		_, err = s.InsertBatch(t.Context(), []*quarantine.Message{fresh, clash})
		wantCode(t, err, quarantine.ECONFLICT)

		all := listAll(t, s, quarantine.Filter{})
		if len(all) != 1 || all[0].ID != kept.ID {
			t.Fatalf("after two failed batches the store holds %v, want only %s", ids(all), kept.ID)
		}
		got, err := s.GetMessage(t.Context(), kept.ID)
		wantOK(t, err, "GetMessage")
		if got.IdempotencyKey != kept.IdempotencyKey {
			t.Fatalf("the failed batch changed the stored message: %q", got.IdempotencyKey)
		}
		_, err = s.GetMessage(t.Context(), fresh.ID)
		wantCode(t, err, quarantine.ENOTFOUND)
	})
}

// testConcurrentInsert has 8 goroutines insert overlapping windows of keys,
// shuffled, in batches: every key must be stored exactly once, exactly one
// result per key is new, and every result names the stored message.
func testConcurrentInsert(t *testing.T, h Harness) {
	s := h.Open(t)
	const workers, window, step, batch = 8, 40, 10, 7
	type result struct {
		key int
		res quarantine.InsertResult
	}
	var (
		mu  sync.Mutex
		out []result
		wg  sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			keys := rng.Perm(window)
			for i := 0; i < len(keys); i += batch {
				var msgs []*quarantine.Message
				var ks []int
				for _, k := range keys[i:min(i+batch, len(keys))] {
					k += w * step
					ks = append(ks, k)
					msgs = append(msgs, newMsg(withDedupe(fmt.Sprintf("key-%d", k)), withIdem(fmt.Sprintf("key-%d", k))))
				}
				res, err := s.InsertBatch(t.Context(), msgs)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				mu.Lock()
				for j, r := range res {
					out = append(out, result{ks[j], r})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored := map[string]*quarantine.Message{}
	byIdem := map[string]string{}
	for _, m := range listAll(t, s, quarantine.Filter{Limit: 13}) {
		if stored[m.ID] != nil {
			t.Fatalf("message %s listed twice", m.ID)
		}
		stored[m.ID] = m
		if byIdem[m.IdempotencyKey] != "" {
			t.Fatalf("key %s stored twice", m.IdempotencyKey)
		}
		byIdem[m.IdempotencyKey] = m.ID
	}
	distinct := window + (workers-1)*step
	if len(stored) != distinct {
		t.Fatalf("stored %d messages, want one per key: %d", len(stored), distinct)
	}
	news := map[int]int{}
	for _, r := range out {
		want := byIdem[fmt.Sprintf("key-%d", r.key)]
		if r.res.ID != want {
			t.Fatalf("key %d: result ID %s, stored message %s", r.key, r.res.ID, want)
		}
		if r.res.New {
			news[r.key]++
		}
	}
	for k := range distinct {
		if news[k] != 1 {
			t.Fatalf("key %d: %d results say new, want exactly 1", k, news[k])
		}
	}
}
