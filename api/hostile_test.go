package api_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestHostileParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"1 OR 1=1"}`))
	extra := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"` + quarantine.NewID(baseTime) + `","x":1}`))
	cases := []struct {
		target string
		status int
		field  string
	}{
		{"/api/v1/messages?cursor=" + forged, 400, "cursor"},
		{"/api/v1/messages?cursor=" + extra, 400, "cursor"},
		{"/api/v1/messages?cursor=not-base64!", 400, "cursor"},
		{"/api/v1/messages?cursor=" + strings.Repeat("A", 300), 400, "cursor"},
		{"/api/v1/messages?queue=%ff", 400, "queue"},
		{"/api/v1/messages?job_name=a%00b", 400, "job_name"},
		{"/api/v1/messages?q=%00", 400, "q"},
		{"/api/v1/messages?owner=%c3%28", 400, "owner"},
		{"/api/v1/messages?queue=" + strings.Repeat("x", 2000), 400, "queue"},
		{"/api/v1/messages?" + strings.Repeat("queue=a&", 101), 400, "queue"},
		{"/api/v1/messages?limit=1000000", 400, "limit"},
		{"/api/v1/messages?limit=99999999999999999999999", 400, "limit"},
		{"/api/v1/messages?limit=0", 400, "limit"},
		{"/api/v1/messages?limit=-5", 400, "limit"},
		{"/api/v1/messages?limit=ten", 400, "limit"},
		{"/api/v1/messages?limit=1&limit=2", 400, "limit"},
		{"/api/v1/messages?status=deleted", 400, "status"},
		{"/api/v1/messages?failure_class=%27%20OR%201=1", 400, "failure_class"},
		{"/api/v1/messages?failed_after=yesterday", 400, "failed_after"},
		{"/api/v1/messages?failed_before=2026-13-01T00:00:00Z", 400, "failed_before"},
		{"/api/v1/messages?failed_after=2026-02-01T00:00:00Z&failed_before=2026-01-01T00:00:00Z", 400, "failed_after"},
		{"/api/v1/messages?sort=id", 400, "sort"},
		{"/api/v1/messages?queue=a&Queue=b", 400, "Queue"},
		{"/api/v1/messages?%ff=1", 400, "\uFFFD"},
		{"/api/v1/messages?%zz", 400, "query"},
		{"/api/v1/messages/not-a-ulid", 404, "id"},
		{"/api/v1/messages/%27%20OR%201=1--", 404, "id"},
		{"/api/v1/messages/%00", 404, "id"},
		{"/api/v1/messages/" + strings.Repeat("Z", 26), 404, "id"},
		{"/api/v1/audit?cursor=-1", 400, "cursor"},
		{"/api/v1/audit?cursor=1%3BDROP", 400, "cursor"},
		{"/api/v1/audit?cursor=1;DROP", 400, "query"},
		{"/api/v1/audit?limit=100000", 400, "limit"},
		{"/api/v1/audit?after=now", 400, "after"},
		{"/api/v1/audit?actor=%ff", 400, "actor"},
		{"/api/v1/audit?action=a%00", 400, "action"},
		{"/api/v1/audit?subject=a&message=b", 400, "message"},
		{"/api/v1/audit?seq=1", 400, "seq"},
		{"/api/v1/audit/verify?head_seq=1", 400, "head_hash"},
		{"/api/v1/audit/verify?head_hash=" + strings.Repeat("0", 64), 400, "head_seq"},
		{"/api/v1/audit/verify?head_seq=1&head_hash=%27%20OR%201=1", 400, "head_hash"},
		{"/api/v1/audit/verify?head_seq=-1&head_hash=" + strings.Repeat("0", 64), 400, "head_seq"},
		{"/api/v1/audit/verify?full=1", 400, "full"},
	}
	for _, tc := range cases {
		t.Run(tc.target[:min(len(tc.target), 60)], func(t *testing.T) {
			t.Parallel()
			e.get(tc.target, e.admin).problem(t, tc.status, tc.field)
		})
	}
}

// SQL metacharacters and LIKE wildcards are plain values: they match
// nothing, and break nothing.
func TestHostileValuesMatchNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	for _, q := range []string{
		"queue=%27%3B%20DROP%20TABLE%20messages%3B--",
		"queue=billing%27%20OR%20%271%27=%271",
		"job_name=%25",
		"q=%25",
		"q=_",
		"q=%27%22%5C",
		"idempotency_key=%2A",
		"owner=%5Bpayments%5D",
		"q=" + strings.Repeat("%E2%80%AE", 100),
	} {
		if n := e.count(e.viewer, "&"+q); n != 0 {
			t.Fatalf("%s matched %d", q, n)
		}
	}
	if n := e.count(e.viewer, ""); n != 1 {
		t.Fatalf("the store lost its message: %d", n)
	}
}
