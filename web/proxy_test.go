package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/clientip"
	"github.com/quarantine-dev/quarantine/web"
)

// TestSecureCookieBehindTrustedProxy: behind a TLS-terminating proxy in
// trusted_proxies, X-Forwarded-Proto: https makes the session cookie
// Secure, with the __Host- prefix; the same header from a peer that is
// not a trusted proxy does not.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	loopback, err := clientip.Parse([]string{"127.0.0.0/8", "::1"}) // the test client's address
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		trusted    bool
		proto      string
		wantSecure bool
	}{
		{true, "https", true},
		{true, "http", false},
		{true, "", false},
		{false, "https", false},
	} {
		t.Run(fmt.Sprintf("trusted=%v proto=%q", c.trusted, c.proto), func(t *testing.T) {
			e := newEnv(t, func(cfg *web.Config) {
				if c.trusted {
					cfg.TrustedProxies = loopback
				}
			})
			secret := e.token("admin", quarantine.RoleAdmin)
			req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/?token="+url.QueryEscape(secret), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.proto != "" {
				req.Header.Set("X-Forwarded-Proto", c.proto)
			}
			res, err := e.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			name := "quarantine_session"
			if c.wantSecure {
				name = "__Host-" + name
			}
			ck := cookieNamed(res, name)
			if res.StatusCode != http.StatusSeeOther || ck == nil {
				t.Fatalf("status %d, cookies %v: want 303 with a session cookie", res.StatusCode, res.Header["Set-Cookie"])
			}
			if ck.Secure != c.wantSecure {
				t.Fatalf("cookie Secure=%v, want %v", ck.Secure, c.wantSecure)
			}
		})
	}
}
