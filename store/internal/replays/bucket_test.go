package replays

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestRefillAndGrant(t *testing.T) {
	t.Parallel()
	b := quarantine.RateBucket{Key: "k", Rate: 4, Burst: 2}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
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
		{"clock going back refills nothing", 0.5, -time.Second, 1, 0, 125 * time.Millisecond},
		{"nothing wanted", 2, 0, 0, 0, 0},
	}
	for _, c := range cases {
		tok := Refill(b, c.tokens, t0, t0.Add(c.elapsed))
		n, wait := Grant([]quarantine.RateBucket{b}, []float64{tok}, c.want)
		if n != c.n || wait != c.wait {
			t.Errorf("%s: Grant = %d, %s; want %d, %s", c.name, n, wait, c.n, c.wait)
		}
	}
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
