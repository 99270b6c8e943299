package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func testSample(t *testing.T, h Harness) {
	t.Run("Uniform", func(t *testing.T) { t.Parallel(); testSampleUniform(t, h) })
	t.Run("Reproducible", func(t *testing.T) { t.Parallel(); testSampleReproducible(t, h, false) })
	t.Run("Stratified", func(t *testing.T) { t.Parallel(); testSampleStratified(t, h, false) })
	t.Run("Invalid", func(t *testing.T) { t.Parallel(); testSampleInvalid(t, h) })
	if h.SetSampleExact != nil {
		t.Run("RankReproducible", func(t *testing.T) { t.Parallel(); testSampleReproducible(t, h, true) })
		t.Run("RankStratified", func(t *testing.T) { t.Parallel(); testSampleStratified(t, h, true) })
		t.Run("RankCoversEveryMessage", func(t *testing.T) { t.Parallel(); testSampleRankCovers(t, h) })
	}
	if h.SetSampleExact != nil && h.OpenUnindexed != nil {
		t.Run("UnindexedSameSample", func(t *testing.T) { t.Parallel(); testSampleUnindexed(t, h) })
		t.Run("UnindexedCoversEveryMessage", func(t *testing.T) { t.Parallel(); testSampleUnindexedCovers(t, h) })
	}
}

// sample runs r and fails t on error or on a result that is not a set of
// distinct messages without payloads, in list order.
func sample(t *testing.T, s store.Store, r quarantine.SampleRequest) []*quarantine.Message {
	t.Helper()
	got, err := s.Sample(t.Context(), r)
	wantOK(t, err, "Sample")
	seen := map[string]bool{}
	for i, m := range got {
		if seen[m.ID] {
			t.Fatalf("seed %d: message %s sampled twice", r.Seed, m.ID)
		}
		seen[m.ID] = true
		if m.Payload != nil {
			t.Fatalf("sampled message %s carries its payload", m.ID)
		}
		if i > 0 && (m.FailedAt.After(got[i-1].FailedAt) || m.FailedAt.Equal(got[i-1].FailedAt) && m.ID > got[i-1].ID) {
			t.Fatalf("sample not in list order at %d", i)
		}
	}
	return got
}

// testSampleUniform checks with a chi-square test over many seeds that
// every message of a small set is equally likely to be sampled.
func testSampleUniform(t *testing.T, h Harness) {
	s := h.Open(t)
	const n, k, seeds = 30, 5, 3000
	var msgs []*quarantine.Message
	for i := range n {
		msgs = append(msgs, newMsg(withQueue([]string{"a", "b", "c"}[i%3])))
	}
	insert(t, s, msgs...)
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Go(func() {
			for seed := w; seed < seeds; seed += workers {
				got, err := s.Sample(t.Context(), quarantine.SampleRequest{Size: k, Seed: int64(seed) * 7919})
				if err != nil || len(got) != k {
					t.Errorf("seed %d: %d messages, %v", seed, len(got), err)
					return
				}
				mu.Lock()
				for _, m := range got {
					counts[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Each seed draws k of n without replacement: the count of a message
	// has variance seeds*(a-c) on the sum-zero subspace, where a = p(1-p)
	// and c is the covariance of two indicators, so that the statistic is
	// chi-square with n-1 degrees of freedom.
	p := float64(k) / n
	pBoth := float64(k*(k-1)) / float64(n*(n-1))
	a, c := p*(1-p), pBoth-p*p
	variance := seeds * (a - c)
	expect := seeds * p
	stat := 0.0
	for _, m := range msgs {
		d := float64(counts[m.ID]) - expect
		stat += d * d / variance
	}
	crit := chiSquareQuantile(n-1, 0.999)
	t.Logf("chi-square %.2f with %d degrees of freedom; 0.999 quantile %.2f", stat, n-1, crit)
	if stat > crit {
		t.Fatalf("sample counts are not uniform: chi-square %.2f > %.2f (counts %v)", stat, crit, counts)
	}
}

// sampleSet opens a store holding messages of 3 queues and of failure
// groups of sizes 1 to 9 (20 messages), or with rank, of sizes 1 to 120
// (200 messages) in a store whose exact method stops at 50 messages (and
// groups at 10), so that samples take arcs of ranks. A quarter of the
// messages is discarded.
func sampleSet(t *testing.T, h Harness, rank bool) (store.Store, []*quarantine.Message) {
	s := h.Open(t)
	return s, fillSampleSet(t, h, s, rank)
}

// fillSampleSet stores sampleSet's messages in s and returns them.
func fillSampleSet(t *testing.T, h Harness, s store.Store, rank bool) []*quarantine.Message {
	if rank {
		h.SetSampleExact(s, 50, 10)
	}
	sizes := []int{1, 2, 3, 5, 8, 40, 120, 21} // 200 messages, 8 groups
	if !rank {
		sizes = []int{1, 2, 3, 5, 9}
	}
	return storeGroups(t, h, s, "failure kind", sizes, 100, 4, 1)
}

// storeGroups stores groups of the sizes (reasons kind A, kind B, …; the
// queues q0 to q2 in turn) in s, batch messages per insert, discards
// every message whose index i has i%every == at, and returns them all.
func storeGroups(t *testing.T, h Harness, s store.Store, kind string, sizes []int, batch, every, at int) []*quarantine.Message {
	var msgs []*quarantine.Message
	for g, size := range sizes {
		for i := range size {
			msgs = append(msgs, newMsg(withReason(fmt.Sprintf("%s %c", kind, 'A'+g)),
				withQueue(fmt.Sprintf("q%d", (g+i)%3))))
		}
	}
	for i := 0; i < len(msgs); i += batch {
		insert(t, s, msgs[i:min(i+batch, len(msgs))]...)
	}
	var discarded []*quarantine.Message
	for i, m := range msgs {
		if i%every == at {
			discarded = append(discarded, m)
		}
	}
	setStatus(t, h, s, quarantine.StatusDiscarded, discarded...)
	return msgs
}

func testSampleReproducible(t *testing.T, h Harness, rank bool) {
	s, msgs := sampleSet(t, h, rank)
	filters := []quarantine.Filter{
		{},
		{Queue: []string{"q1"}},
		{Status: []quarantine.Status{quarantine.StatusQuarantined}, Queue: []string{"q0", "q2"}},
		{Text: "kind g"},
		{Queue: []string{"none"}},
	}
	for _, f := range filters {
		want := expected(f, msgs)
		distinct := map[string]bool{}
		for seed := range int64(12) {
			r := quarantine.SampleRequest{Filter: f, Size: 7, Seed: seed}
			got := sample(t, s, r)
			if len(got) != min(7, len(want)) {
				t.Fatalf("filter %+v seed %d: %d messages, want %d", f, seed, len(got), min(7, len(want)))
			}
			for _, m := range got {
				if !slices.Contains(want, m.ID) {
					t.Fatalf("filter %+v: sampled %s, which does not match", f, m.ID)
				}
			}
			again := sample(t, s, r)
			if !slices.Equal(ids(got), ids(again)) {
				t.Fatalf("filter %+v seed %d: %v then %v", f, seed, ids(got), ids(again))
			}
			distinct[strings.Join(ids(got), ",")] = true
		}
		if len(want) > 10 && len(distinct) < 10 {
			t.Fatalf("filter %+v: 12 seeds gave only %d distinct samples", f, len(distinct))
		}
	}
}

func testSampleStratified(t *testing.T, h Harness, rank bool) {
	s, msgs := sampleSet(t, h, rank)
	for _, by := range []string{quarantine.StratifyFingerprint, quarantine.StratifyQueue} {
		for _, f := range []quarantine.Filter{{}, {Status: []quarantine.Status{quarantine.StatusQuarantined}}, {Text: "failure"}} {
			groups := map[string]int{}
			for _, m := range msgs {
				if matches(f, m) {
					groups[groupKey(by, m)]++
				}
			}
			total := len(expected(f, msgs))
			for _, size := range []int{len(groups), len(groups) + 5, len(groups) - 1, 1, total + 3} {
				for seed := range int64(3) {
					r := quarantine.SampleRequest{Filter: f, Size: size, StratifyBy: by, Seed: seed}
					got := sample(t, s, r)
					if len(got) != min(size, total) {
						t.Fatalf("%s size %d: %d messages, want %d", by, size, len(got), min(size, total))
					}
					seen := map[string]int{}
					for _, m := range got {
						if !matches(f, m) {
							t.Fatalf("%s: sampled %s, which does not match %+v", by, m.ID, f)
						}
						seen[groupKey(by, m)]++
					}
					switch {
					case size >= len(groups) && len(seen) != len(groups):
						t.Fatalf("%s size %d seed %d: %d of %d groups represented: %v", by, size, seed, len(seen), len(groups), seen)
					case size < len(groups) && len(seen) != size:
						t.Fatalf("%s size %d (< %d groups): %d groups represented, want one message from each of %d", by, size, len(groups), len(seen), size)
					}
					if again := sample(t, s, r); !slices.Equal(ids(got), ids(again)) {
						t.Fatalf("%s seed %d: not reproducible", by, seed)
					}
				}
			}
		}
	}
}

func groupKey(by string, m *quarantine.Message) string {
	if by == quarantine.StratifyQueue {
		return m.Queue
	}
	return m.Fingerprint
}

// testSampleRankCovers checks that the rank method reaches every message:
// over many seeds each is sampled at least once.
func testSampleRankCovers(t *testing.T, h Harness) {
	s, msgs := sampleSet(t, h, true)
	sampleCovers(t, s, msgs)
}

// sampleCovers checks that 400 samples of 25 in s (a sampleSet with
// rank) reach every message of msgs.
func sampleCovers(t *testing.T, s store.Store, msgs []*quarantine.Message) {
	t.Helper()
	// A message is in the arc of 25 when the offset falls in the 25 rank
	// gaps before it: about 1 chance in 8, and above 1 in 20 unless the
	// ranks drawn are extraordinarily uneven, so 400 seeds miss none.
	seen := map[string]bool{}
	for seed := range int64(400) {
		for _, m := range sample(t, s, quarantine.SampleRequest{Size: 25, Seed: seed}) {
			seen[m.ID] = true
		}
	}
	if len(seen) != len(msgs) {
		t.Fatalf("400 samples of 25 reached %d of %d messages", len(seen), len(msgs))
	}
}

func testSampleInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	for _, r := range []quarantine.SampleRequest{
		{Size: -1}, {Size: quarantine.MaxSample + 1}, {StratifyBy: "owner"},
		{Filter: quarantine.Filter{Status: []quarantine.Status{"bogus"}}},
	} {
		_, err := s.Sample(t.Context(), r)
		wantCode(t, err, quarantine.EINVALID)
	}
	got, err := s.Sample(t.Context(), quarantine.SampleRequest{})
	if err != nil || len(got) != 0 {
		t.Fatalf("Sample of an empty store = %d messages, %v", len(got), err)
	}
}

// indexSearch runs the search indexer of s (Indexer) by hand, up to n
// queue entries in batches of at most batch, and returns how many it
// took.
func indexSearch(t *testing.T, s store.Store, n, batch int) int {
	t.Helper()
	ix, ok := s.(Indexer)
	if !ok {
		t.Fatalf("%T has no IndexSearch", s)
	}
	took := 0
	for took < n {
		got, err := ix.IndexSearch(t.Context(), min(batch, n-took))
		wantOK(t, err, "IndexSearch")
		if got == 0 {
			break
		}
		took += got
	}
	return took
}

// testSampleUnindexed checks that a sample does not depend on how far
// the store's background indexer is: a store may keep the index of ranks
// that large samples read off the ingest path (the SQLite and PostgreSQL
// stores write it with the search index), and a sample must then also
// read the messages still queued for it. Large uniform samples (filtered
// or not) and stratified ones are taken with nothing indexed, with part
// indexed, after edits queued indexed messages again, and with
// everything indexed: all the same.
func testSampleUnindexed(t *testing.T, h Harness) {
	s := h.OpenUnindexed(t)
	h.SetSampleExact(s, 50, 10)
	// 1000 messages, 6 groups
	msgs := storeGroups(t, h, s, "unindexed kind", []int{3, 9, 40, 150, 300, 498}, 250, 5, 2)

	var reqs []quarantine.SampleRequest
	for _, f := range []quarantine.Filter{
		{},
		{Status: []quarantine.Status{quarantine.StatusQuarantined}},
		{Queue: []string{"q1", "q2"}},
	} {
		for _, size := range []int{60, 300} {
			for seed := range int64(4) {
				reqs = append(reqs, quarantine.SampleRequest{Filter: f, Size: size, Seed: seed * 104729})
			}
		}
		for _, by := range []string{quarantine.StratifyFingerprint, quarantine.StratifyQueue} {
			for _, size := range []int{4, 60, 300} {
				for seed := range int64(3) {
					reqs = append(reqs, quarantine.SampleRequest{Filter: f, Size: size, StratifyBy: by, Seed: seed})
				}
			}
		}
	}
	take := func() [][]string {
		out := make([][]string, len(reqs))
		for i, r := range reqs {
			got := sample(t, s, r)
			if want := min(r.Size, len(expected(r.Filter, msgs))); len(got) != want {
				t.Fatalf("%+v: %d messages, want %d", r, len(got), want)
			}
			for _, m := range got {
				if !matches(r.Filter, m) {
					t.Fatalf("%+v: sampled %s, which does not match", r, m.ID)
				}
			}
			out[i] = ids(got)
		}
		return out
	}
	compare := func(stage string, want, got [][]string) {
		t.Helper()
		for i := range reqs {
			if !slices.Equal(want[i], got[i]) {
				t.Fatalf("%s: %+v gave %d messages %v, with nothing indexed %d %v",
					stage, reqs[i], len(got[i]), got[i], len(want[i]), want[i])
			}
		}
	}
	unindexed := take()
	if n := indexSearch(t, s, 437, 437); n != 437 {
		t.Fatalf("indexed %d queue entries of 1000, want 437", n)
	}
	compare("437 of 1000 indexed", unindexed, take())
	// Edits queue messages again: some indexed, some not.
	for _, m := range []*quarantine.Message{msgs[0], msgs[5], msgs[400], msgs[999]} {
		_, err := s.EditPayload(t.Context(), edit(m, m.PayloadSHA256, []byte(`{"edited":true}`)))
		wantOK(t, err, "EditPayload")
	}
	compare("after edits", unindexed, take())
	indexSearch(t, s, 1<<30, 300)
	compare("all indexed", unindexed, take())
}

// testSampleUnindexedCovers checks that the rank method reaches every
// message while none, and then part, of them are indexed.
func testSampleUnindexedCovers(t *testing.T, h Harness) {
	s := h.OpenUnindexed(t)
	msgs := fillSampleSet(t, h, s, true)
	sampleCovers(t, s, msgs)
	indexSearch(t, s, 100, 100)
	sampleCovers(t, s, msgs)
}
