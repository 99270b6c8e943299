package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/web"
)

// verifyCounter counts the chain walks and the heads they were asked to
// pass through; broken makes them report a broken chain.
type verifyCounter struct {
	store.Store
	mu     sync.Mutex
	calls  int
	expect [][]quarantine.AuditHead
	broken bool
}

func (v *verifyCounter) VerifyAudit(ctx context.Context, expect ...quarantine.AuditHead) (quarantine.AuditVerification, error) {
	v.mu.Lock()
	v.calls++
	v.expect = append(v.expect, expect)
	broken := v.broken
	v.mu.Unlock()
	res, err := v.Store.VerifyAudit(ctx, expect...)
	if err == nil && broken {
		res.OK, res.FirstBadSeq, res.Problem = false, 2, "hash mismatch <b>x</b>"
	}
	return res, err
}

func (v *verifyCounter) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

func auditEnv(t *testing.T) (*env, *verifyCounter) {
	t.Helper()
	var vc *verifyCounter
	e := newEnv(t, func(c *web.Config) {
		vc = &verifyCounter{Store: c.Store}
		c.Store = vc
	})
	return e, vc
}

// appendEvents appends n events by actor with action, one second apart
// from start, and returns them.
func appendEvents(t *testing.T, s store.Store, n int, actor, action string) []quarantine.AuditEvent {
	t.Helper()
	var out []quarantine.AuditEvent
	for i := range n {
		ev := quarantine.NewAuditEvent(actor, action, fmt.Sprintf("subject-%d", i), map[string]any{"i": i})
		got, err := s.AppendAudit(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

var seqRE = regexp.MustCompile(`<tr data-seq="(\d+)" data-row>`)

func seqs(body string) []string {
	var out []string
	for _, m := range seqRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestAuditListsFiltersAndPages(t *testing.T) {
	e, _ := auditEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin)) // seq 1: token.create
	appendEvents(t, e.store, 60, "alice", "replay.start")
	bob := appendEvents(t, e.store, 3, "bob", quarantine.ActionEdit)

	// Unfiltered: the first 50 events, oldest first, and the next page.
	res, body := get(t, c, e.srv.URL+"/audit")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/audit: %d %s", res.StatusCode, body)
	}
	got := seqs(body)
	if len(got) != 50 || got[0] != "1" || got[49] != "50" {
		t.Fatalf("first page seqs %v", got)
	}
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(body)
	if next == nil || !strings.Contains(next[1], "cursor=50") {
		t.Fatalf("no next page link: %v", next)
	}
	newest := regexp.MustCompile(`id="newest" href="([^"]+)"`).FindStringSubmatch(body)
	if newest == nil {
		t.Fatal("no link to the newest events")
	}
	_, body = get(t, c, e.srv.URL+strings.ReplaceAll(next[1], "&amp;", "&"))
	if got := seqs(body); len(got) != 14 || got[0] != "51" || got[13] != "64" || strings.Contains(body, `id="next"`) {
		t.Fatalf("second page seqs %v", got)
	}
	_, body = get(t, c, e.srv.URL+newest[1])
	if got := seqs(body); len(got) != 50 || got[49] != "64" {
		t.Fatalf("newest page seqs %v", got)
	}

	// Filters: action, actor, subject, and the time range (datetime-local
	// and RFC 3339), each as the API takes it.
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"action=message.edit", 3},
		{"actor=alice", 50},
		{"actor=bob&action=replay.start", 0},
		{"subject=subject-1&actor=bob", 1},
		{"after=" + url.QueryEscape(bob[1].Time.Format(time.RFC3339Nano)) + "&actor=bob", 2},
		{"before=" + url.QueryEscape(bob[1].Time.Format(time.RFC3339Nano)) + "&actor=bob", 1},
		{"after=2000-01-01T00:00&before=2000-01-02T00:00", 0},
	} {
		res, body := get(t, c, e.srv.URL+"/audit?"+tc.query)
		if res.StatusCode != http.StatusOK || len(seqs(body)) != tc.want {
			t.Fatalf("/audit?%s: %d, %d events, want %d", tc.query, res.StatusCode, len(seqs(body)), tc.want)
		}
		if strings.Contains(body, `id="newest"`) {
			t.Fatalf("/audit?%s: a filtered list has no newest link", tc.query)
		}
	}
	for _, q := range []string{"after=yesterday", "cursor=-1", "cursor=x", "after=2000-01-02T00:00&before=2000-01-01T00:00"} {
		res, body := get(t, c, e.srv.URL+"/audit?"+q)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="error"`) {
			t.Fatalf("/audit?%s: %d, want 400 with the error shown", q, res.StatusCode)
		}
	}
}

// The chain is walked once per head: again only when the log grew, then
// through the head verified before; a broken chain is an alert.
func TestAuditChainStatusIsCachedPerHead(t *testing.T) {
	e, vc := auditEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	_, body := get(t, c, e.srv.URL+"/audit")
	if !strings.Contains(body, `id="chain" role="status"><strong>Chain verified</strong>: 1 events up to seq 1`) {
		t.Fatalf("chain status:\n%s", body)
	}
	get(t, c, e.srv.URL+"/audit?actor=x")
	if n := vc.count(); n != 1 {
		t.Fatalf("%d walks for two pages at one head, want 1", n)
	}
	appendEvents(t, e.store, 2, "alice", "x.y")
	_, body = get(t, c, e.srv.URL+"/audit")
	if n := vc.count(); n != 2 || !strings.Contains(body, "3 events up to seq 3") {
		t.Fatalf("%d walks after the log grew, want 2:\n%s", n, body)
	}
	if len(vc.expect[1]) != 1 || vc.expect[1][0].Seq != 1 {
		t.Fatalf("the second walk must pass through the head verified first: %v", vc.expect[1])
	}
	vc.mu.Lock()
	vc.broken = true
	vc.mu.Unlock()
	appendEvents(t, e.store, 1, "alice", "x.y")
	_, body = get(t, c, e.srv.URL+"/audit")
	if !strings.Contains(body, `id="chain" role="alert"><strong>Chain broken</strong> at seq 2: hash mismatch &lt;b&gt;x&lt;/b&gt;`) {
		t.Fatalf("broken chain status:\n%s", body)
	}
}

// The API's rule: any role without owners; with owners, admins only.
func TestAuditAccessMirrorsTheAPI(t *testing.T) {
	e, _ := auditEnv(t)
	for _, tc := range []struct {
		role   quarantine.Role
		owners []string
		want   int
	}{
		{quarantine.RoleViewer, nil, http.StatusOK},
		{quarantine.RoleOperator, nil, http.StatusOK},
		{quarantine.RoleViewer, []string{"team-a"}, http.StatusForbidden},
		{quarantine.RoleOperator, []string{"team-a"}, http.StatusForbidden},
		{quarantine.RoleAdmin, []string{"team-a"}, http.StatusOK},
	} {
		c := e.client()
		e.login(c, e.token(fmt.Sprintf("%s-%d", tc.role, len(tc.owners)), tc.role, tc.owners...))
		if res, _ := get(t, c, e.srv.URL+"/audit"); res.StatusCode != tc.want {
			t.Fatalf("%s with owners %v: %d, want %d", tc.role, tc.owners, res.StatusCode, tc.want)
		}
	}
	if res, _ := get(t, e.client(), e.srv.URL+"/audit"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("anonymous /audit: %d, want a redirect to the login", res.StatusCode)
	}
}

// Stored strings are text: actor, action, subject and details.
func TestAuditHostileEventIsText(t *testing.T) {
	e, _ := auditEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	m := e.message(quarantine.Message{Queue: "q", Payload: []byte(`{}`)})
	ev := quarantine.NewAuditEvent(`<img src=x onerror=alert(1)>`, `"><script>x()</script>`, m.ID,
		map[string]string{"reason": `</code><svg onload=alert(2)>`})
	if _, err := e.store.AppendAudit(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, c, e.srv.URL+"/audit")
	for _, bad := range []string{"<img src=x", "<script>x", "<svg onload"} {
		if strings.Contains(body, bad) {
			t.Fatalf("%q reached the page unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;img src=x onerror=alert(1)&gt;", "&#34;&gt;&lt;script&gt;x()&lt;/script&gt;",
		`<a href="/messages/` + m.ID + `" class="id-link"><code class="id" title="` + m.ID + `">…` + m.ID[len(m.ID)-8:] + `</code></a>`,
		`data-copy="` + m.ID + `"`, "&lt;/code&gt;&lt;svg onload=alert(2)&gt;"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the page lacks %q", want)
		}
	}
}
