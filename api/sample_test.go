package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

type sampleJSON struct {
	Seed       int64     `json:"seed"`
	Size       int       `json:"size"`
	StratifyBy string    `json:"stratify_by"`
	Items      []message `json:"items"`
}

func (e *env) sample(secret string, body any) sampleJSON {
	e.t.Helper()
	var s sampleJSON
	e.json(http.MethodPost, "/api/v1/messages/sample", secret, body).want(e.t, http.StatusOK).decode(e.t, &s)
	for _, m := range s.Items {
		if m.Payload != nil || m.PayloadBase64 != nil {
			e.t.Fatal("sampled items carry no payload")
		}
	}
	return s
}

func ids(ms []message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

// seedSet stores groups of messages: three reasons (three fingerprints)
// of sizes 40, 4 and 1 in billing, and 5 in orders.x.
func seedSet(e *env) {
	e.t.Helper()
	var elems [][]byte
	add := func(queue, reason string, n int) {
		for i := range n {
			elems = append(elems, []byte(`{"envelope":"quarantine.failure/v1","job":{"name":"charge","queue":"`+queue+
				`","idempotency_key":"`+queue+reason+strconv.Itoa(i)+`","payload":{"i":`+strconv.Itoa(i)+`}},"failure":{"class":"permanent","reason":"`+reason+`"}}`))
		}
	}
	add("billing", "card declined", 40)
	add("billing", "timeout", 4)
	add("billing", "no such customer", 1)
	add("orders.x", "card declined", 5)
	e.ingestOK(e.admin, array(elems...))
}

func TestSampleReproducible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedSet(e)
	a := e.sample(e.viewer, map[string]any{"size": 7, "seed": 42})
	b := e.sample(e.viewer, map[string]any{"size": 7, "seed": 42})
	if a.Seed != 42 || a.Size != 7 || a.StratifyBy != "none" || len(a.Items) != 7 || !slices.Equal(ids(a.Items), ids(b.Items)) {
		t.Fatalf("same seed, different samples: %v vs %v", ids(a.Items), ids(b.Items))
	}
	if len(slices.Compact(ids(a.Items))) != 7 {
		t.Fatal("a message was sampled twice")
	}
	// Without a seed the server picks one; it reproduces the sample.
	c := e.sample(e.viewer, map[string]any{"size": 7})
	d := e.sample(e.viewer, map[string]any{"size": 7, "seed": c.Seed})
	if c.Seed < 0 || c.Seed >= 1<<53 || !slices.Equal(ids(c.Items), ids(d.Items)) {
		t.Fatalf("picked seed %d does not reproduce: %v vs %v", c.Seed, ids(c.Items), ids(d.Items))
	}
	// Some other seed gives another sample (7 of 50: equal by chance is rare).
	differs := false
	for seed := range 5 {
		if !slices.Equal(ids(e.sample(e.viewer, map[string]any{"size": 7, "seed": seed + 1000}).Items), ids(a.Items)) {
			differs = true
		}
	}
	if !differs {
		t.Fatal("every seed gives the same sample")
	}
	// The filter applies; a set smaller than size is returned whole.
	f := e.sample(e.viewer, map[string]any{"size": 100, "seed": 1, "filter": map[string]any{"queue": []string{"orders.x"}}})
	if len(f.Items) != 5 {
		t.Fatalf("filtered sample of 5: %d", len(f.Items))
	}
	for _, m := range f.Items {
		if m.Queue != "orders.x" {
			t.Fatalf("sampled %s outside the filter", m.Queue)
		}
	}
	// A token with owners samples only its owners' messages.
	orders := e.token("orders-viewer", quarantine.RoleViewer, "orders")
	if s := e.sample(orders, map[string]any{"size": 100, "seed": 1}); len(s.Items) != 5 {
		t.Fatalf("scoped sample: %d items", len(s.Items))
	}
	if s := e.sample(orders, map[string]any{"size": 100, "filter": map[string]any{"owner": []string{"payments"}}}); len(s.Items) != 0 {
		t.Fatalf("scoped sample of another owner: %d items", len(s.Items))
	}
}

// TestSampleStratified: a stratified sample holds every group, even the
// group of one message among 50.
func TestSampleStratified(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedSet(e)
	for _, tc := range []struct {
		by     string
		groups int
		key    func(m message) string
	}{
		{"fingerprint", 3, func(m message) string { return m.Fingerprint }}, // card declined shares a fingerprint across queues
		{"queue", 2, func(m message) string { return m.Queue }},
	} {
		for seed := range 10 {
			s := e.sample(e.viewer, map[string]any{"size": 5, "seed": seed, "stratify_by": tc.by})
			seen := map[string]bool{}
			for _, m := range s.Items {
				seen[tc.key(m)] = true
			}
			if len(s.Items) != 5 || len(seen) != tc.groups || s.StratifyBy != tc.by {
				t.Fatalf("stratify_by %s seed %d: %d items in %d groups, want 5 in %d", tc.by, seed, len(s.Items), len(seen), tc.groups)
			}
		}
	}
	var raw map[string]json.RawMessage
	e.json(http.MethodPost, "/api/v1/messages/sample", e.viewer, map[string]any{}).want(t, http.StatusOK).decode(t, &raw)
	if string(raw["size"]) != "10" {
		t.Fatalf("default size %s", raw["size"])
	}
}
