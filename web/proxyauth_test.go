package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/clientip"
	"github.com/quarantine-dev/quarantine/web"
)

// proxyEnv is the UI behind an identity-aware proxy: requests from the
// trusted addresses carry X-Forwarded-Email and X-Forwarded-Groups.
func proxyEnv(t *testing.T, trusted string) *env {
	t.Helper()
	proxies, err := clientip.Parse([]string{trusted})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *web.Config) {
		c.TrustedProxies = proxies
		c.Proxy = &web.ProxyConfig{UserHeader: "X-Forwarded-Email", GroupsHeader: "X-Forwarded-Groups", Roles: ssoRoles}
	})
}

// proxied sends a request as the proxy would, naming user and groups.
func proxied(t *testing.T, c *http.Client, method, u, user, groups string, form url.Values) (*http.Response, string) {
	t.Helper()
	h := []string{"X-Forwarded-Email", user, "X-Forwarded-Groups", groups}
	if method == http.MethodPost {
		return postForm(t, c, u, form, h...)
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(h[0], h[1])
	req.Header.Set(h[2], h[3])
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// From a trusted proxy the headers sign the person in, with the role of
// their groups; their actions are audited as proxy:USER.
func TestProxyHeadersFromTrustedProxySignIn(t *testing.T) {
	t.Parallel()
	e := proxyEnv(t, "127.0.0.1/32")
	msg := e.message(quarantine.Message{Queue: "payments.charge", JobName: "charge", Owner: "payments", Payload: []byte(`{"n":1}`)})
	c := e.client()
	res, body := proxied(t, c, http.MethodGet, e.srv.URL+"/messages/"+msg.ID, "alice@example.com", "staff, pay-ops", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "proxy:alice@example.com (operator: payments)") {
		t.Fatalf("/messages/{id} through the proxy: %d %s", res.StatusCode, body)
	}
	res, _ = proxied(t, c, http.MethodPost, e.srv.URL+"/messages/"+msg.ID+"/discard", "alice@example.com", "staff, pay-ops",
		url.Values{"csrf": {csrf(t, body)}, "reason": {"duplicate"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("discard through the proxy: %d", res.StatusCode)
	}
	evs := auditOf(t, e, quarantine.ActionDiscard)
	if len(evs) != 1 || evs[0].Actor != "proxy:alice@example.com" {
		t.Fatalf("discard events %+v, want one by proxy:alice@example.com", evs)
	}
	// The cookie without the proxy's headers opens nothing: the headers
	// are the sign-in, the session only carries the forms' CSRF token.
	if res, _ := get(t, c, e.srv.URL+"/messages"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the proxy person's cookie without headers: %d, want 303 to /login", res.StatusCode)
	}
	// Another person behind the same browser's cookie is themselves.
	_, body = proxied(t, c, http.MethodGet, e.srv.URL+"/messages", "carol@example.com", "bill-viewers", nil)
	if !strings.Contains(body, "proxy:carol@example.com (viewer: billing)") {
		t.Fatalf("carol is shown as someone else: %s", body)
	}
}

// A person of no mapped group gets a 403 page, audited.
func TestProxyPersonWithoutRoleRefused(t *testing.T) {
	t.Parallel()
	e := proxyEnv(t, "127.0.0.1/32")
	res, body := proxied(t, e.client(), http.MethodGet, e.srv.URL+"/messages", "bob@example.com", "staff", nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "none of your groups is given a role") {
		t.Fatalf("bob: %d %s", res.StatusCode, body)
	}
	evs := auditOf(t, e, quarantine.ActionAccessDenied)
	if len(evs) != 1 || evs[0].Actor != "proxy:bob@example.com" || !strings.Contains(string(evs[0].Details), "ui.proxy_no_role") {
		t.Fatalf("refusal events %+v", evs)
	}
}

// From anyone but a trusted proxy the headers are ignored: no sign-in.
func TestProxyHeadersFromUntrustedPeerIgnored(t *testing.T) {
	t.Parallel()
	e := proxyEnv(t, "10.0.0.0/8")
	res, _ := proxied(t, e.client(), http.MethodGet, e.srv.URL+"/messages", "alice@example.com", "pay-ops", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("forged headers from an untrusted peer: %d %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
}
