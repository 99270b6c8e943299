package postgres_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// TestSampleWhileIndexersRun checks that the samples read while several
// indexers (as several service instances run them) move messages from
// the search queue to the side index of ranks, and while edits queue
// indexed messages again, are the samples read before any was indexed:
// each arc reads the side index and the queue in one snapshot, so a
// message that moves meanwhile is read once, and the ranks of both halves
// are the messages' own.
func TestSampleWhileIndexersRun(t *testing.T) {
	t.Parallel()
	s := openStore(t, postgres.WithoutSearchIndexer())
	postgres.SetSampleExact(s, 50, 10)
	ctx := t.Context()
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	const n = 1200
	var msgs []*quarantine.Message
	for i := range n {
		msgs = append(msgs, &quarantine.Message{Source: "src", SourceKind: quarantine.SourceMemory,
			Queue: fmt.Sprintf("q%d", i%4), JobName: fmt.Sprintf("job-%d", i%12), FailureClass: quarantine.ClassPermanent,
			Reason: "boom", Payload: fmt.Appendf(nil, `{"i":%d}`, i), FailedAt: at.Add(time.Duration(i) * time.Second),
			DedupeKey: fmt.Sprint(i)})
	}
	for i := 0; i < n; i += 200 {
		if _, err := s.InsertBatch(ctx, msgs[i:i+200]); err != nil {
			t.Fatal(err)
		}
	}
	var reqs []quarantine.SampleRequest
	for seed := range int64(3) {
		reqs = append(reqs,
			quarantine.SampleRequest{Size: 100, Seed: seed},
			quarantine.SampleRequest{Size: 100, Seed: seed, Filter: quarantine.Filter{Queue: []string{"q1"}}},
			quarantine.SampleRequest{Size: 60, Seed: seed, Filter: quarantine.Filter{Fingerprint: []string{msgs[5].Fingerprint}}},
			quarantine.SampleRequest{Size: 60, Seed: seed, StratifyBy: quarantine.StratifyFingerprint},
			quarantine.SampleRequest{Size: 60, Seed: seed, StratifyBy: quarantine.StratifyQueue})
	}
	take := func() [][]string {
		out := make([][]string, len(reqs))
		for i, r := range reqs {
			got, err := s.Sample(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range got {
				out[i] = append(out[i], m.ID)
			}
			slices.Sort(out[i])
		}
		return out
	}
	queued := func() int {
		var q int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM search_pending WHERE sample_rank IS NOT NULL`).Scan(&q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	want := take()
	for i, w := range want {
		if len(w) != reqs[i].Size {
			t.Fatalf("%+v: %d messages, want %d", reqs[i], len(w), reqs[i].Size)
		}
	}

	// Rounds of three indexers taking a batch each, an edit, and the
	// samples read meanwhile and after, until the queue is empty.
	check := func(got [][]string, q int) {
		t.Helper()
		for i := range reqs {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%+v with about %d messages queued: %v, want %v", reqs[i], q, got[i], want[i])
			}
		}
	}
	midway := 0 // rounds that ended with part of the messages indexed
	for round := 0; ; round++ {
		var took atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				n, err := s.IndexSearch(ctx, 17)
				if err != nil {
					t.Error(err)
				}
				took.Add(int64(n))
			})
		}
		wg.Go(func() {
			id := msgs[(round*97)%n].ID
			if _, err := s.Pool().Exec(ctx, `UPDATE messages SET reason = reason || ' again' WHERE id = $1`, id); err != nil {
				t.Error(err)
			}
		})
		during := take()
		wg.Wait()
		q := queued()
		check(during, q)
		check(take(), q)
		if q > 0 && q < n {
			midway++
		}
		if took.Load() == 0 {
			break
		}
	}
	if q := queued(); q != 0 {
		t.Fatalf("%d messages still queued after the indexers", q)
	}
	var ranked int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM sample_ranks) + (SELECT count(*) FROM fingerprint_ranks)`).Scan(&ranked); err != nil {
		t.Fatal(err)
	}
	if ranked != 2*n {
		t.Fatalf("%d rows in the side index, want %d", ranked, 2*n)
	}
	if got := take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("all indexed: %v, want %v", got, want)
	}
	if midway < 10 {
		t.Fatalf("%d rounds ended with part of the messages indexed, want at least 10", midway)
	}
}
