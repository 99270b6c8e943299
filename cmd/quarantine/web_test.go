package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
)

// The banner's URL opens the web UI on the same server as the API, whose
// paths answer as before.
func TestServe_WebUIMountedBesideTheAPI(t *testing.T) {
	m, stderr, _ := serve(t, "--database", "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	urls := reLoginURL.FindAllStringSubmatch(stderr.String(), -1)
	if len(urls) != 1 {
		t.Fatalf("no login URL in:\n%s", stderr)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	base := "http://" + m.Addr()
	if res, _ := get(base + "/"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("GET /: %d %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ := get(urls[0][0])
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
		t.Fatalf("banner URL: %d %q, want 303 to /overview", res.StatusCode, res.Header.Get("Location"))
	}
	if res, body := get(base + "/messages"); res.StatusCode != http.StatusOK || !strings.Contains(body, "Messages") {
		t.Fatalf("/messages: %d", res.StatusCode)
	}
	// The API's paths are the API's: a session cookie is no bearer token.
	for path, want := range map[string]int{"/api/v1/messages": http.StatusUnauthorized, "/healthz": http.StatusOK,
		"/readyz": http.StatusOK, "/api/nowhere": http.StatusNotFound} {
		res, _ := get(base + path)
		if res.StatusCode != want {
			t.Fatalf("%s: %d, want %d", path, res.StatusCode, want)
		}
		if path != "/healthz" && path != "/readyz" && !strings.Contains(res.Header.Get("Content-Type"), "json") {
			t.Fatalf("%s answered by the UI: %s", path, res.Header.Get("Content-Type"))
		}
	}
}
