package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine/api"
)

// TestServe_LargeHeader boots the real service and sends a 100 KB
// Authorization header to the API and a 100 KB cookie to the web UI: each
// is 431 as problem+json naming the field (net/http's own limit would
// have answered plain text), and the service goes on serving.
func TestServe_LargeHeader(t *testing.T) {
	t.Parallel()
	m, _, _ := serve(t, "--database", "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	base := "http://" + m.Addr()
	for _, tc := range []struct{ path, name, value, field string }{
		{"/api/v1/queues", "Authorization", "Bearer " + strings.Repeat("x", 100_000), "Authorization"},
		{"/overview", "Cookie", "s=" + strings.Repeat("c", 100_000), "Cookie"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(tc.name, tc.value)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var p api.Problem
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || res.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(b, &p) != nil || p.Status != 431 || p.Field != tc.field || p.RequestID != res.Header.Get("X-Request-Id") {
			t.Fatalf("%s with a 100 KB %s: %d %q %s", tc.path, tc.name, res.StatusCode, res.Header.Get("Content-Type"), b)
		}
	}
	if status, _, _ := (client{t: t, base: base}).do(http.MethodGet, "/healthz", nil); status != http.StatusOK {
		t.Fatalf("healthz after: %d", status)
	}
}
