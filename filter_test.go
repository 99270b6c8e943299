package quarantine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestFilterValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		f     quarantine.Filter
		field string // "" means valid
	}{
		{"zero value", quarantine.Filter{}, ""},
		{"max limit", quarantine.Filter{Limit: quarantine.MaxLimit}, ""},
		{"huge limit", quarantine.Filter{Limit: 1 << 30}, "limit"},
		{"negative limit", quarantine.Filter{Limit: -1}, "limit"},
		{"sql in value is fine", quarantine.Filter{Queue: []string{"x'; DROP TABLE messages; --"}}, ""},
		{"invalid utf8", quarantine.Filter{JobName: []string{"\xff\xfe"}}, "job_name"},
		{"nul", quarantine.Filter{Owner: []string{"a\x00b"}}, "owner"},
		{"too long", quarantine.Filter{Source: []string{strings.Repeat("x", quarantine.MaxFilterValue+1)}}, "source"},
		{"too many", quarantine.Filter{IdempotencyKey: make([]string, quarantine.MaxFilterValues+1)}, "idempotency_key"},
		{"bad status", quarantine.Filter{Status: []quarantine.Status{"gone"}}, "status"},
		{"bad class", quarantine.Filter{FailureClass: []quarantine.FailureClass{"x"}}, "failure_class"},
		{"bad text", quarantine.Filter{Text: "\xc3"}, "q"},
		{"inverted range", quarantine.Filter{FailedAfter: time.Unix(10, 0), FailedBefore: time.Unix(5, 0)}, "failed_after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.f
			err := f.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if f.Limit < 1 {
					t.Fatalf("limit not defaulted: %d", f.Limit)
				}
				return
			}
			if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != tc.field {
				t.Fatalf("want EINVALID on %s, got %v", tc.field, err)
			}
		})
	}
}

func TestCursorRoundTripAndForgery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	c := &quarantine.Cursor{FailedAt: now, ID: quarantine.NewID(now)}
	got, err := quarantine.DecodeCursor(c.Encode())
	if err != nil || !got.FailedAt.Equal(c.FailedAt) || got.ID != c.ID {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []string{"", "!!!", "e30", c.Encode() + "x", strings.Repeat("A", 300),
		"eyJ0IjoiMjAyNi0xMS0yOVQwMTowMjowM1oiLCJpIjoiJyBPUiAxPTEgLS0ifQ", // valid JSON, SQL in the id
	} {
		if _, err := quarantine.DecodeCursor(bad); quarantine.ErrorField(err) != "cursor" {
			t.Errorf("DecodeCursor(%q) = %v", bad, err)
		}
	}
}

// Not parallel: IDs are monotonic for non-decreasing times, and other tests
// make IDs for other times.
func TestIDsAreTimeOrdered(t *testing.T) {
	now := time.Now()
	prev := ""
	for i := 0; i < 1000; i++ {
		id := quarantine.NewID(now)
		if !quarantine.ValidID(id) || id <= prev {
			t.Fatalf("id %d: %q after %q", i, id, prev)
		}
		prev = id
	}
	if quarantine.ValidID("not-an-id") || quarantine.ValidID("") {
		t.Fatal("ValidID accepts garbage")
	}
}
