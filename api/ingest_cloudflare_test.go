package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// ingestFrom posts body with the source headers (kind, then name; "" for
// none).
func (e *env) ingestFrom(kind, name string, body []byte) *resp {
	e.t.Helper()
	var h []string
	if kind != "" {
		h = append(h, "X-Quarantine-Source-Kind", kind)
	}
	if name != "" {
		h = append(h, "X-Quarantine-Source", name)
	}
	return e.do(http.MethodPost, "/api/v1/ingest", e.operator, body, h...)
}

func TestIngestCloudflareSourceKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		kind, name string
		wantSource string
		wantKind   quarantine.SourceKind
	}{
		{"cloudflare", "cf-prod", "cf-prod", quarantine.SourceCloudflare},
		{"Cloudflare", "", "cloudflare", quarantine.SourceCloudflare},
		{"", "", "http", quarantine.SourceHTTP},
		{"http", "ignored", "http", quarantine.SourceHTTP}, // a name is honoured for the known pushers only
	}
	for i, c := range cases {
		var res struct {
			Items []struct{ ID string } `json:"items"`
		}
		e.ingestFrom(c.kind, c.name, envelopeJSON("billing", "send_invoice", 100+i, baseTime)).want(t, 200).decode(t, &res)
		m := e.message(res.Items[0].ID, e.viewer)
		if m.Source != c.wantSource || m.SourceKind != c.wantKind {
			t.Errorf("kind %q name %q: stored source %q kind %q, want %q %q", c.kind, c.name, m.Source, m.SourceKind, c.wantSource, c.wantKind)
		}
	}
}

func TestIngestSourceKindRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ kind, name, field string }{
		{"rabbitmq", "", "X-Quarantine-Source-Kind"}, // a collector's kind is not claimed over HTTP
		{"memory", "", "X-Quarantine-Source-Kind"},
		{"nonsense", "", "X-Quarantine-Source-Kind"},
		{"cloudflare", "a b", "X-Quarantine-Source"},
		{"cloudflare", "<script>", "X-Quarantine-Source"},
		{"cloudflare", strings.Repeat("x", 65), "X-Quarantine-Source"},
	} {
		e.ingestFrom(c.kind, c.name, envelopeJSON("billing", "send_invoice", 1, baseTime)).problem(t, 400, c.field)
	}
	if n := e.count(e.viewer, ""); n != 0 {
		t.Fatalf("%d messages stored after refusals", n)
	}
}
