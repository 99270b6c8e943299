package api_test

import (
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
