package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.get("/healthz", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
		t.Fatalf("healthz %d %s", r.status, r.body)
	}
	if r := e.get("/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("readyz %d %s", r.status, r.body)
	}
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.get("/readyz", "").problem(t, http.StatusServiceUnavailable, "")
	if r := e.get("/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz with the store down: %d", r.status)
	}
}

func TestRoutingErrorsAreProblems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.get("/nope", "").problem(t, http.StatusNotFound, "")
	e.get("/api/v1/nope", e.admin).problem(t, http.StatusNotFound, "")
	r := e.do(http.MethodDelete, "/api/v1/messages", e.admin, nil)
	r.problem(t, http.StatusMethodNotAllowed, "")
	if r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	e.do(http.MethodGet, "/api/v1/ingest", e.admin, nil).problem(t, http.StatusMethodNotAllowed, "")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.do(http.MethodGet, "/healthz", "", nil, "X-Request-Id", "abc-123.X_y"); r.header.Get("X-Request-Id") != "abc-123.X_y" {
		t.Fatalf("sane id not kept: %q", r.header.Get("X-Request-Id"))
	}
	for _, bad := range []string{"has space", strings.Repeat("a", 65), "<script>", "a\u00e9"} {
		r := e.do(http.MethodGet, "/nope", "", nil, "X-Request-Id", bad)
		if id := r.header.Get("X-Request-Id"); id == bad || len(id) != 24 {
			t.Fatalf("insane id %q became %q", bad, id)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ingestOK(e.operator, envelopeJSON("billing", "a", 1, baseTime))
	e.get("/api/v1/messages/01J00000000000000000000000", e.viewer)
	e.get("/no/such/path", "")
	r := e.get("/metrics", "")
	body := string(r.body)
	for _, want := range []string{
		`quarantine_http_requests_total{method="POST",route="/api/v1/ingest",status="200"} 1`,
		`quarantine_http_requests_total{method="GET",route="/api/v1/messages/{id}",status="404"} 1`,
		`quarantine_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`quarantine_http_request_duration_seconds_count{method="POST",route="/api/v1/ingest"} 1`,
		`quarantine_ingest_messages_total{failure_class="exhausted",result="stored"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
