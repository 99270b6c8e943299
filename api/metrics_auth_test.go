package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// /metrics is open by default; with credentials configured it takes a
// bearer token or basic auth, and refuses anything else with 401.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	open := api.New(api.Config{Store: st}).Handler()
	if code := scrape(open, nil); code != http.StatusOK {
		t.Fatalf("open /metrics answered %d", code)
	}
	h := api.New(api.Config{Store: st, MetricsAuth: &api.MetricsAuth{Token: "s3cret", User: "prom", Password: "pw"}}).Handler()
	for _, c := range []struct {
		name string
		set  func(*http.Request)
		want int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, http.StatusOK},
		{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cre") }, http.StatusUnauthorized},
		{"basic", func(r *http.Request) { r.SetBasicAuth("prom", "pw") }, http.StatusOK},
		{"wrong password", func(r *http.Request) { r.SetBasicAuth("prom", "pw2") }, http.StatusUnauthorized},
	} {
		if code := scrape(h, c.set); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
}

func scrape(h http.Handler, set func(*http.Request)) int {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if set != nil {
		set(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}
