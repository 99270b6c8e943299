package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

type verification struct {
	OK          bool                 `json:"ok"`
	Checked     int64                `json:"checked"`
	Head        quarantine.AuditHead `json:"head"`
	FirstBadSeq int64                `json:"first_bad_seq"`
	Problem     string               `json:"problem"`
}

func (e *env) verify(query string) verification {
	e.t.Helper()
	r := e.get("/api/v1/audit/verify"+query, e.admin)
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		e.t.Fatalf("verify: %d %q %s", r.status, r.header.Get("Cache-Control"), r.body)
	}
	var v verification
	r.decode(e.t, &v)
	return v
}

func TestAuditList(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // three token.create events
	e.token("four", quarantine.RoleViewer)
	var all []auditEvent
	target := "/api/v1/audit?limit=3"
	for range 3 {
		r := e.get(target, e.admin)
		var p struct {
			Items      []auditEvent `json:"items"`
			NextCursor *string      `json:"next_cursor"`
		}
		r.decode(t, &p)
		all = append(all, p.Items...)
		if p.NextCursor == nil {
			break
		}
		target = "/api/v1/audit?limit=3&cursor=" + *p.NextCursor
	}
	if len(all) != 4 {
		t.Fatalf("%d events, want 4", len(all))
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) || ev.Action != quarantine.ActionTokenCreate || ev.Actor != "test" {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	filtered := e.page("/api/v1/audit?action=token.create&actor=test&after=2000-01-01T00:00:00Z&before=2999-01-01T00:00:00Z", e.admin)
	none := e.page("/api/v1/audit?actor=nobody", e.admin)
	if len(filtered.Items) != 4 || len(none.Items) != 0 || none.NextCursor != nil {
		t.Fatalf("filtered %d none %d", len(filtered.Items), len(none.Items))
	}
	bySubject := e.page("/api/v1/audit?message="+strings.Repeat("0", 26), e.admin)
	if len(bySubject.Items) != 0 {
		t.Fatalf("subject filter: %d", len(bySubject.Items))
	}
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.verify("")
	if !v.OK || v.Checked != 3 || v.Head.Seq != 3 || len(v.Head.Hash) != 64 || v.Problem != "" {
		t.Fatalf("verify %+v", v)
	}
	head := v.Head
	e.ingest(e.viewer, []byte(`{}`)) // a denial: one more event
	v = e.verify("?head_seq=" + strconv.FormatInt(head.Seq, 10) + "&head_hash=" + head.Hash)
	if !v.OK || v.Checked != 4 || v.Head.Seq != 4 {
		t.Fatalf("verify with the old head %+v", v)
	}
	// A head this server never reported does not verify.
	v = e.verify("?head_seq=2&head_hash=" + strings.Repeat("ab", 32))
	if v.OK || v.FirstBadSeq != 2 || v.Problem == "" {
		t.Fatalf("verify with a wrong head %+v", v)
	}
	// A head beyond the chain's end: its tail was cut.
	v = e.verify("?head_seq=9&head_hash=" + strings.Repeat("ab", 32))
	if v.OK || v.FirstBadSeq != 5 {
		t.Fatalf("verify with a later head %+v", v)
	}
}

// TestAuditExport streams the log as JSON Lines across more than one
// store page, with the list's filters; every line is an AuditEvent of the
// spec (checked by the spec's ndjson decoder in checkResponse).
func TestAuditExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // three token.create events
	ctx := context.Background()
	const extra = quarantine.MaxLimit + 5
	for i := range extra {
		ev := quarantine.NewAuditEvent("token:bulk", "test.event", "s"+strconv.Itoa(i%2), map[string]any{"i": i})
		if _, err := e.store.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(query string) []quarantine.AuditEvent {
		t.Helper()
		r := e.get("/api/v1/audit/export"+query, e.admin).want(t, http.StatusOK)
		if r.header.Get("Content-Type") != "application/x-ndjson" || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("headers %v", r.header)
		}
		var out []quarantine.AuditEvent
		dec := json.NewDecoder(bytes.NewReader(r.body))
		for dec.More() {
			var ev quarantine.AuditEvent
			if err := dec.Decode(&ev); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		return out
	}
	all := lines("")
	if len(all) != extra+3 {
		t.Fatalf("%d lines, want %d", len(all), extra+3)
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d", i, ev.Seq)
		}
	}
	if v := quarantine.VerifyChain(all); !v.OK {
		t.Fatalf("the exported chain does not verify: %+v", v)
	}
	if got := lines("?actor=token:bulk&message=s1"); len(got) != extra/2 {
		t.Fatalf("filtered: %d lines, want %d", len(got), extra/2)
	}
	if got := lines("?action=nothing"); len(got) != 0 {
		t.Fatalf("no match: %d lines", len(got))
	}
	doc, _ := loadSpec(t)
	export := doc.Paths.Find("/api/v1/audit/export").Get.Responses.Status(http.StatusOK).Value.Content.Get("application/x-ndjson").Schema
	if _, err := ndjsonDecoder(strings.NewReader("{\"seq\":0}\n"), nil, export, nil); err == nil ||
		!strings.Contains(err.Error(), "line 1 is not a AuditEvent") {
		t.Fatalf("the ndjson decoder of the spec check accepts a line that is no AuditEvent (%v)", err)
	}
	e.get("/api/v1/audit/export?cursor=3", e.admin).problem(t, http.StatusBadRequest, "cursor")
	e.get("/api/v1/audit/export?after=2026-02-01T00:00:00Z&before=2026-01-01T00:00:00Z", e.admin).problem(t, http.StatusBadRequest, "after")
	scoped := e.token("payments-viewer", quarantine.RoleViewer, "payments")
	e.get("/api/v1/audit/export", scoped).problem(t, http.StatusForbidden, "")
}
