package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// textCases are reasons and payloads with SQL and LIKE metacharacters,
// each with a decoy that a pattern (instead of a literal) match would hit.
var textReasons = []string{
	"disk 100% full", "disk 1000 full",
	"rate_limit exceeded", "ratexlimit exceeded",
	"it's broken", "its broken",
	`path C:\temp\new`, "path C:/temp/new",
	"syntax -- comment", "syntax - - comment",
	"'; DROP TABLE messages; --",
	"Timeout Talking To SMTP", "connection refused",
}

var textPayloads = [][]byte{
	[]byte(`{"order_id":"ORD-42-XYZ"}`),
	[]byte(`{"note":"a Needle here"}`),
	{0xff, 0xfe, 'n', 'e', 'e', 'd', 'l', 'e'}, // not text: never searched
	[]byte("needle\x00with nul"),               // not text: never searched
	[]byte(`{"pct":"50%_off"}`),
	[]byte(`plain text, no match`),
}

// listDataset stores a varied set of messages (several with the same
// failed_at) and gives some of them other statuses.
func listDataset(t *testing.T, h Harness, s store.Store) []*quarantine.Message {
	t.Helper()
	queues := []string{"orders", "billing", "reports"}
	jobs := []string{"send_email", "charge", "render"}
	classes := []quarantine.FailureClass{quarantine.ClassPermanent, quarantine.ClassExhausted, quarantine.ClassMalformed}
	owners := []string{"team-a", "team-b", ""}
	var msgs []*quarantine.Message
	for i := range 60 {
		m := newMsg(
			withQueue(queues[i%3]), withOwner(owners[(i/4)%3]),
			withSource([]string{"src-a", "src-b"}[(i/3)%2]),
			withReason(textReasons[i%len(textReasons)]),
			withPayload(textPayloads[i%len(textPayloads)]),
			withIdem(fmt.Sprintf("idem-%d", i%25)), // shared across sources
			withFailedAt(baseTime.Add(time.Duration(i%17)*time.Minute)),
		)
		m.JobName = jobs[(i/2)%3]
		m.FailureClass = classes[(i/5)%3]
		m.DedupeKey = fmt.Sprintf("list-%d", i)
		msgs = append(msgs, m)
	}
	for i := 0; i < len(msgs); i += 20 {
		insert(t, s, msgs[i:i+20]...)
	}
	spreadStatuses(t, h, s, msgs, 7, 2, 5)
	return msgs
}

func testListMessages(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"Filters", testListFilters},
		{"KeysetPaging", testListPaging},
		{"InvalidFilter", testListInvalid},
	})
}

func testListFilters(t *testing.T, h Harness) {
	s := h.Open(t)
	msgs := listDataset(t, h, s)
	byID := map[string]*quarantine.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	t0 := baseTime.Add(5 * time.Minute).Truncate(time.Microsecond)
	t1 := baseTime.Add(11 * time.Minute).Truncate(time.Microsecond)
	cases := []struct {
		name string
		f    quarantine.Filter
	}{
		{"none", quarantine.Filter{}},
		{"queue", quarantine.Filter{Queue: []string{"billing"}}},
		{"queues", quarantine.Filter{Queue: []string{"billing", "reports"}}},
		{"job", quarantine.Filter{JobName: []string{"charge"}}},
		{"class", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassMalformed}}},
		{"classes", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassMalformed, quarantine.ClassPermanent}}},
		{"status", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusReplayed}}},
		{"statuses", quarantine.Filter{Status: []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusDiscarded}}},
		{"owner", quarantine.Filter{Owner: []string{"team-b"}}},
		{"owner empty value", quarantine.Filter{Owner: []string{""}}},
		{"source", quarantine.Filter{Source: []string{"src-b"}}},
		{"idempotency key", quarantine.Filter{IdempotencyKey: []string{"idem-3"}}},
		{"failed after", quarantine.Filter{FailedAfter: t0}},
		{"failed before", quarantine.Filter{FailedBefore: t0}},
		{"failed between", quarantine.Filter{FailedAfter: t0, FailedBefore: t1}},
		{"unknown value", quarantine.Filter{Queue: []string{"nope"}}},
		{"queue+status+owner", quarantine.Filter{Queue: []string{"orders"}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Owner: []string{"team-a"}}},
		{"source+idempotency key", quarantine.Filter{Source: []string{"src-a"}, IdempotencyKey: []string{"idem-3", "idem-4"}}},
		{"class+status", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassMalformed}, Status: []quarantine.Status{quarantine.StatusReplayed}}},
		{"job+status", quarantine.Filter{JobName: []string{"charge"}, Status: []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusDiscarded}}},
		{"job+class", quarantine.Filter{JobName: []string{"charge", "render"}, FailureClass: []quarantine.FailureClass{quarantine.ClassPermanent}}},
		{"job+owner+status", quarantine.Filter{JobName: []string{"send_email"}, Owner: []string{"team-a"}, Status: []quarantine.Status{quarantine.StatusQuarantined}}},
		{"class+status+source", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassPermanent}, Status: []quarantine.Status{quarantine.StatusQuarantined}, Source: []string{"src-b"}}},
		{"class+status matching none", quarantine.Filter{FailureClass: []quarantine.FailureClass{quarantine.ClassExpired}, Status: []quarantine.Status{quarantine.StatusRefailed}}},
		{"job+class+time", quarantine.Filter{JobName: []string{"render"}, FailureClass: []quarantine.FailureClass{quarantine.ClassExhausted}, FailedAfter: t0}},
		{"text+queue", quarantine.Filter{Text: "needle", Queue: []string{"orders"}}},
		{"text+status", quarantine.Filter{Text: "disk", Status: []quarantine.Status{quarantine.StatusQuarantined}}},
	}
	for _, q := range []string{"100%", "%", "_", "rate_limit", "'", "it's", `\`, `C:\temp`, "--", "- -",
		"'; drop table messages; --", "TIMEOUT talking", "ord-42-xyz", "needle", "50%_off", "no such text", " "} {
		cases = append(cases, struct {
			name string
			f    quarantine.Filter
		}{"text " + q, quarantine.Filter{Text: q}})
	}
	for _, c := range cases {
		want := expected(c.f, msgs)
		for _, limit := range []int{1000, 4} {
			f := c.f
			f.Limit = limit
			got := listAll(t, s, f)
			if !slices.Equal(ids(got), want) {
				t.Errorf("%s (limit %d): got %d messages %v, want %d %v", c.name, limit, len(got), ids(got), len(want), want)
				continue
			}
			for _, m := range got {
				if d := diffMessage(byID[m.ID], m, false); len(d) > 0 {
					t.Errorf("%s: listed message %s differs: %s", c.name, m.ID, strings.Join(d, "; "))
				}
			}
		}
		if c.name == "none" && len(want) != len(msgs) {
			t.Fatalf("no filter lists %d of %d", len(want), len(msgs))
		}
	}
	// Cases that must select something, so that the comparisons above mean something.
	for _, q := range []string{"100%", "rate_limit", "it's", `C:\temp`, "--", "'; drop table messages; --", "ord-42-xyz", "needle"} {
		if len(expected(quarantine.Filter{Text: q}, msgs)) == 0 {
			t.Fatalf("dataset has no match for %q", q)
		}
	}
}

func testListPaging(t *testing.T, h Harness) {
	s := h.Open(t)
	same := baseTime.Add(time.Hour)
	var msgs []*quarantine.Message
	for i := range 63 { // 9 full pages of 7: the last page must still say there is no next
		at := baseTime.Add(time.Duration(i) * time.Second)
		if i%3 == 0 {
			at = same
		}
		msgs = append(msgs, newMsg(withFailedAt(at), withQueue([]string{"a", "b"}[i%2])))
	}
	// Insert in an order unrelated to failed_at or id.
	for _, i := range []int{5, 1, 3, 0, 4, 2, 6, 8, 7} {
		insert(t, s, msgs[i*7:i*7+7]...)
	}
	byID := map[string]*quarantine.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for _, f := range []quarantine.Filter{{Limit: 7}, {Limit: 7, Queue: []string{"a"}}, {Limit: 1}, {Limit: 63}, {Limit: 64}} {
		want := expected(f, msgs)
		var got []string
		seen := map[string]bool{}
		pages := 0
		for {
			p, err := s.ListMessages(t.Context(), f)
			wantOK(t, err, "ListMessages")
			pages++
			if len(p.Messages) > f.Limit {
				t.Fatalf("page of %d messages, limit %d", len(p.Messages), f.Limit)
			}
			for _, m := range p.Messages {
				if seen[m.ID] {
					t.Fatalf("message %s visited twice", m.ID)
				}
				seen[m.ID] = true
				got = append(got, m.ID)
				if m.Payload != nil || m.PayloadSize != len(byID[m.ID].Payload) {
					t.Fatalf("list entry: payload %v, size %d; want nil payload with its size", m.Payload != nil, m.PayloadSize)
				}
			}
			if p.Next == nil {
				break
			}
			if len(p.Messages) == 0 {
				t.Fatal("an empty page has a next cursor")
			}
			last := p.Messages[len(p.Messages)-1]
			if !p.Next.FailedAt.Equal(last.FailedAt) || p.Next.ID != last.ID {
				t.Fatalf("Next = %+v, want the cursor of the page's last message %s", p.Next, last.ID)
			}
			f.After = p.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d queue %v: walked %v, want %v", f.Limit, f.Queue, got, want)
		}
		if wantPages := max(1, (len(want)+f.Limit-1)/f.Limit); pages != wantPages {
			t.Fatalf("limit %d: %d pages for %d messages, want %d", f.Limit, pages, len(want), wantPages)
		}
	}
	// A cursor that names no stored message still positions the walk.
	c := &quarantine.Cursor{FailedAt: same.Truncate(time.Microsecond), ID: quarantine.NewID(baseTime)}
	f := quarantine.Filter{After: c, Limit: 1000}
	got := listAll(t, s, f)
	if want := expected(f, msgs); !slices.Equal(ids(got), want) {
		t.Fatalf("foreign cursor: got %v, want %v", ids(got), want)
	}
}

func testListInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	cases := []struct {
		field string
		f     quarantine.Filter
	}{
		{"limit", quarantine.Filter{Limit: -1}},
		{"limit", quarantine.Filter{Limit: quarantine.MaxLimit + 1}},
		{"status", quarantine.Filter{Status: []quarantine.Status{"bogus"}}},
		{"failure_class", quarantine.Filter{FailureClass: []quarantine.FailureClass{"nope' OR 1=1"}}},
		{"queue", quarantine.Filter{Queue: []string{"nul\x00"}}},
		{"owner", quarantine.Filter{Owner: []string{"bad\xffutf8"}}},
		{"job_name", quarantine.Filter{JobName: []string{strings.Repeat("j", quarantine.MaxFilterValue+1)}}},
		{"source", quarantine.Filter{Source: make([]string, quarantine.MaxFilterValues+1)}},
		{"idempotency_key", quarantine.Filter{IdempotencyKey: []string{"\x00"}}},
		{"q", quarantine.Filter{Text: "bad\xc3\x28"}},
		{"q", quarantine.Filter{Text: strings.Repeat("x", 10000)}},
		{"failed_after", quarantine.Filter{FailedAfter: baseTime, FailedBefore: baseTime}},
	}
	for _, c := range cases {
		_, err := s.ListMessages(t.Context(), c.f)
		wantCode(t, err, quarantine.EINVALID)
		if got := quarantine.ErrorField(err); got != c.field {
			t.Errorf("invalid %s: error names field %q", c.field, got)
		}
	}
}
