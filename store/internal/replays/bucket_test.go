package replays

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// With nothing reserved ahead, a grant takes what the bucket holds now.
func TestReserveNow(t *testing.T) {
	t.Parallel()
	b := quarantine.RateBucket{Key: "k", Rate: 4, Burst: 2}
	cases := []struct {
		name    string
		tokens  float64
		elapsed time.Duration
		want    int
		n       int
		wait    time.Duration
	}{
		{"full", 2, 0, 5, 2, 0},
		{"capped at burst", 0, time.Hour, 5, 2, 0},
		{"partial", 0, 300 * time.Millisecond, 5, 1, 0},
		{"empty waits for one token", 0, 100 * time.Millisecond, 5, 0, 150 * time.Millisecond},
		// Another engine's clock ahead stamped it: it refills from that
		// stamp on, never twice.
		{"a stamp ahead of the clock", 0.5, -time.Second, 1, 0, 1125 * time.Millisecond},
		{"nothing wanted", 2, 0, 0, 0, 0},
		{"more than the burst stored (another batch's)", 5, 0, 5, 2, 0},
	}
	for _, c := range cases {
		now := t0.Add(c.elapsed)
		n, at, wait, next := Reserve([]quarantine.RateBucket{b}, []Level{{c.tokens, t0}}, c.want, now, 0)
		if n != c.n || wait != c.wait {
			t.Errorf("%s: Reserve = %d, wait %s; want %d, %s", c.name, n, wait, c.n, c.wait)
		}
		if n > 0 && (at.Sub(now) > time.Microsecond || at.Before(now) || len(next) != 1) {
			t.Errorf("%s: %d at %s (now %s), next %v", c.name, n, at, now, next)
		}
		if n == 0 && next != nil {
			t.Errorf("%s: nothing granted, yet next %v", c.name, next)
		}
	}
}

// A grant ahead draws the bucket below empty by at most ahead × rate,
// and its tokens are due when the refill covers them.
func TestReserveAhead(t *testing.T) {
	t.Parallel()
	b := []quarantine.RateBucket{{Key: "k", Rate: 10, Burst: 4}}
	l := []Level{Full(b[0], t0)}
	ahead := 500 * time.Millisecond
	steps := []struct {
		want int
		n    int
		at   time.Duration // after t0
	}{
		{4, 4, 0},                      // the burst, now
		{4, 4, 400 * time.Millisecond}, // the next 4 are refilled by 0.4 s
		{4, 1, 500 * time.Millisecond}, // only one more is due within ahead
	}
	for i, s := range steps {
		n, at, _, next := Reserve(b, l, s.want, t0, ahead)
		if n != s.n || !at.Equal(t0.Add(s.at)) {
			t.Fatalf("step %d: %d at +%s, want %d at +%s", i, n, at.Sub(t0), s.n, s.at)
		}
		l = next
	}
	if l[0].Tokens < -10*ahead.Seconds()-1e-6 {
		t.Fatalf("the bucket went %.2f below empty, more than ahead × rate", -l[0].Tokens)
	}
	n, _, wait, _ := Reserve(b, l, 1, t0, ahead)
	if n != 0 || wait != 100*time.Millisecond {
		t.Fatalf("nothing within ahead: %d, wait %s; want 0 and 100ms", n, wait)
	}
	// Reserved ahead is reserved for every caller, ahead or not.
	n, _, wait, _ = Reserve(b, l, 1, t0.Add(550*time.Millisecond), 0)
	if n != 0 || wait != 50*time.Millisecond {
		t.Fatalf("at 0.55 s: %d, wait %s; want 0 until 0.6 s", n, wait)
	}
	n, at, _, _ := Reserve(b, l, 4, t0.Add(time.Second), 0)
	if n != 4 || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("at 1 s: %d at +%s, want the 4 refilled since 0.6 s", n, at.Sub(t0))
	}
}

// A hold (tokens 0 until a later time) keeps every grant after it.
func TestReserveAfterHold(t *testing.T) {
	t.Parallel()
	b := []quarantine.RateBucket{{Key: "k", Rate: 10, Burst: 5}}
	hold := []Level{{0, t0.Add(10 * time.Second)}}
	n, _, wait, _ := Reserve(b, hold, 1, t0, time.Second)
	if n != 0 || wait != 9*time.Second+100*time.Millisecond {
		t.Fatalf("during the hold: %d, wait %s; want 0 and 9.1s", n, wait)
	}
	n, at, _, _ := Reserve(b, hold, 3, t0.Add(9800*time.Millisecond), time.Second)
	if n != 3 || !at.Equal(t0.Add(10300*time.Millisecond)) {
		t.Fatalf("just before the hold ends: %d at +%s, want 3 at +10.3s", n, at.Sub(t0))
	}
}

type grant struct {
	at      time.Time
	n       int
	buckets []int
}

// Grants of random sizes, asked at random times with random ahead, by
// two batches sharing a destination: used at their at, every bucket's
// grants stay within capacity + rate × d in every interval d, and none is
// due more than its ahead after it was asked.
func TestReserveNeverAboveTheRate(t *testing.T) {
	t.Parallel()
	specs := []quarantine.RateBucket{
		{Key: "batch:a", Rate: 50, Burst: 5},
		{Key: "batch:b", Rate: 20, Burst: 10},
		{Key: "dest:q", Rate: 40, Burst: 8},
	}
	uses := [][]int{{0, 2}, {1, 2}}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		levels := make([]Level, len(specs))
		for i, b := range specs {
			levels[i] = Full(b, t0)
		}
		now := t0
		var grants []grant
		total := 0
		for range 2000 {
			now = now.Add(time.Duration(rng.IntN(40)) * time.Millisecond)
			use := uses[rng.IntN(len(uses))]
			bs, ls := make([]quarantine.RateBucket, len(use)), make([]Level, len(use))
			for j, i := range use {
				bs[j], ls[j] = specs[i], levels[i]
			}
			ahead := time.Duration(rng.IntN(300)) * time.Millisecond
			n, at, wait, next := Reserve(bs, ls, 1+rng.IntN(6), now, ahead)
			if n == 0 {
				if wait <= 0 {
					t.Fatal("no grant and no wait")
				}
				continue
			}
			if at.Before(now) || at.Sub(now) > ahead+time.Microsecond {
				t.Fatalf("seed %d: a grant asked at %s with ahead %s is due at %s", seed, now.Sub(t0), ahead, at.Sub(t0))
			}
			for j, i := range use {
				levels[i] = next[j]
				if floor := -specs[i].Rate*ahead.Seconds() - 1e-6; levelAt(specs[i], next[j], now) < floor {
					t.Fatalf("seed %d: bucket %s went %.3f below empty at %s (ahead %s)", seed, specs[i].Key, -levelAt(specs[i], next[j], now), now.Sub(t0), ahead)
				}
			}
			grants = append(grants, grant{at, n, use})
			total += n
		}
		for i, b := range specs {
			var mine []grant
			for _, g := range grants {
				if slices.Contains(g.buckets, i) {
					mine = append(mine, g)
				}
			}
			slices.SortStableFunc(mine, func(x, y grant) int { return x.at.Compare(y.at) })
			for s := range mine {
				sum := 0
				for e := s; e < len(mine); e++ {
					sum += mine[e].n
					d := mine[e].at.Sub(mine[s].at).Seconds()
					if limit := Capacity(b) + b.Rate*d + 1e-6; float64(sum) > limit {
						t.Fatalf("seed %d: bucket %s granted %d in %.6fs, more than %.3f", seed, b.Key, sum, d, limit)
					}
				}
			}
		}
		// The destination binds: 40/s over the whole run, give or take its burst.
		if span := now.Sub(t0).Seconds(); float64(total) < 40*span*0.9 {
			t.Fatalf("seed %d: only %d granted in %.1fs at 40/s", seed, total, span)
		}
	}
}

// levelAt is the tokens of b at now, level l (negative when reserved
// ahead).
func levelAt(b quarantine.RateBucket, l Level, now time.Time) float64 {
	return math.Min(Capacity(b), l.Tokens+b.Rate*math.Max(0, now.Sub(l.At).Seconds()))
}

func TestBucketsSortedAndValidated(t *testing.T) {
	t.Parallel()
	bs, err := Buckets([]quarantine.RateBucket{{Key: "b", Rate: 1}, {Key: "a", Rate: 2}, {Key: "b", Rate: 3}})
	if err != nil || len(bs) != 2 || bs[0].Key != "a" || bs[1].Rate != 1 {
		t.Fatalf("Buckets = %v, %v", bs, err)
	}
	if _, err := Buckets([]quarantine.RateBucket{{Key: "a", Rate: 0}}); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Fatalf("a zero rate: %v", err)
	}
}
