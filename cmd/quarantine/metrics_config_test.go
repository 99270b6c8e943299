package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// metrics: protects /metrics with a bearer token or basic auth read from
// files; a bad entry is an error naming its key.
func TestServe_MetricsAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"token": "scrape-me\n", "pw": "hunter2\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(cfg, []byte("database: sqlite:"+filepath.Join(dir, "q.db")+"\nmetrics:\n  token_file: "+
		filepath.Join(dir, "token")+"\n  basic_user: prom\n  basic_password_file: "+filepath.Join(dir, "pw")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, _ := serve(t, "--config", cfg)
	get := func(set func(*http.Request)) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+"/metrics", nil)
		if set != nil {
			set(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(nil); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d", code)
	}
	if code := get(func(r *http.Request) { r.Header.Set("Authorization", "Bearer scrape-me") }); code != http.StatusOK {
		t.Errorf("bearer: %d", code)
	}
	if code := get(func(r *http.Request) { r.SetBasicAuth("prom", "hunter2") }); code != http.StatusOK {
		t.Errorf("basic: %d", code)
	}
	if code := get(func(r *http.Request) { r.SetBasicAuth("prom", "hunter3") }); code != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d", code)
	}
}

func TestMetricsConfig_Errors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, key string }{
		{"metrics: {token_file: /nonexistent/token}", "metrics.token_file"},
		{"metrics: {token_file: " + empty + "}", "metrics.token_file"},
		{"metrics: {basic_user: prom}", "metrics.basic_password_file"},
		{"metrics: {basic_password_file: " + empty + "}", "metrics.basic_user"},
	} {
		cfg := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(cfg, []byte(c.yaml+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: error %v, want one naming %s", c.yaml, err, c.key)
		}
	}
}
