package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

func cookieNamed(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// The banner's URL logs in with a random session id in an HttpOnly,
// SameSite=Strict cookie and redirects to a URL without the token.
func TestLoginBannerURLSetsSessionCookieAndRedirects(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprint("secure=", secure), func(t *testing.T) {
			e := newEnv(t, func(c *web.Config) { c.Secure = secure })
			secret := e.token("admin", quarantine.RoleAdmin)
			res, _ := get(t, e.client(), e.srv.URL+"/?token="+url.QueryEscape(secret))
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d, want 303", res.StatusCode)
			}
			if loc := res.Header.Get("Location"); loc != "/overview" || strings.Contains(loc, "token") {
				t.Fatalf("Location %q, want /overview", loc)
			}
			name := "quarantine_session"
			if secure { // a Secure cookie is also a __Host- cookie
				name = "__Host-" + name
			}
			c := cookieNamed(res, name)
			if c == nil {
				t.Fatalf("no session cookie in %v", res.Header["Set-Cookie"])
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != secure || c.Path != "/" {
				t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v, Path=/", c, secure)
			}
			if strings.Contains(c.Value, secret) || strings.Contains(c.Value, quarantine.HashTokenSecret(secret)) || len(c.Value) < 40 {
				t.Fatalf("cookie value %q must be a random session id, not the token", c.Value)
			}
			if res.Header.Get("Referrer-Policy") != "same-origin" || res.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("headers %v", res.Header)
			}
		})
	}
}

func TestLoginSessionOpensMessagesAndLogoutEndsIt(t *testing.T) {
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	c := e.client()
	res, _ := get(t, c, e.srv.URL+"/messages")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("anonymous /messages: %d %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	e.login(c, secret)
	res, body := get(t, c, e.srv.URL+"/messages")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Log out") {
		t.Fatalf("/messages: %d %s", res.StatusCode, body)
	}
	if cc := res.Header.Get("Content-Security-Policy"); !strings.Contains(cc, "default-src 'none'") {
		t.Fatalf("CSP %q", cc)
	}
	// Logout without the CSRF token is refused; the session lives on.
	res, _ = postForm(t, c, e.srv.URL+"/logout", url.Values{})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without csrf: %d, want 403", res.StatusCode)
	}
	res, _ = postForm(t, c, e.srv.URL+"/logout", url.Values{"csrf": {"forged"}})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout with a wrong csrf: %d, want 403", res.StatusCode)
	}
	// With the token but from another origin: refused.
	res, _ = postForm(t, c, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}}, "Origin", "http://evil.example")
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout from another origin: %d, want 403", res.StatusCode)
	}
	res, _ = postForm(t, c, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}}, "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout cross-site: %d, want 403", res.StatusCode)
	}
	if res, _ := get(t, c, e.srv.URL+"/messages"); res.StatusCode != http.StatusOK {
		t.Fatalf("session ended by a refused logout: %d", res.StatusCode)
	}
	res, _ = postForm(t, c, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if ck := cookieNamed(res, "quarantine_session"); ck == nil || ck.MaxAge >= 0 {
		t.Fatalf("logout must expire the cookie: %v", res.Header["Set-Cookie"])
	}
	if res, _ := get(t, c, e.srv.URL+"/messages"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout /messages: %d, want 303", res.StatusCode)
	}
}

// A session whose cookie is replayed after logout is dead on the server.
func TestLoginSessionIDReplayedAfterLogoutIsRefused(t *testing.T) {
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	c := e.client()
	e.login(c, secret)
	u, _ := url.Parse(e.srv.URL)
	old := c.Jar.Cookies(u)
	_, body := get(t, c, e.srv.URL+"/messages")
	postForm(t, c, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}})
	c2 := e.client()
	c2.Jar.SetCookies(u, old)
	if res, _ := get(t, c2, e.srv.URL+"/messages"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("replayed session: %d, want 303 to /login", res.StatusCode)
	}
}

func TestLoginFormNeedsItsCSRFToken(t *testing.T) {
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	c := e.client()
	res, body := get(t, c, e.srv.URL+"/login")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/login: %d", res.StatusCode)
	}
	tok := csrf(t, body)
	// Without the CSRF field, or with another browser's: refused.
	if res, _ := postForm(t, c, e.srv.URL+"/login", url.Values{"token": {secret}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("login without csrf: %d, want 403", res.StatusCode)
	}
	_, body = get(t, c, e.srv.URL+"/login")
	tok = csrf(t, body)
	if res, _ := postForm(t, e.client(), e.srv.URL+"/login", url.Values{"token": {secret}, "csrf": {tok}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("login with another browser's csrf: %d, want 403", res.StatusCode)
	}
	res, _ = postForm(t, c, e.srv.URL+"/login", url.Values{"token": {secret}, "csrf": {tok}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" || cookieNamed(res, "quarantine_session") == nil {
		t.Fatalf("login: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Header["Set-Cookie"])
	}
}

func TestLoginRefusedIsAuditedAndSlowed(t *testing.T) {
	e := newEnv(t, func(c *web.Config) { c.LoginDelay = 200 * time.Millisecond })
	revoked := e.token("gone", quarantine.RoleAdmin)
	toks, _ := e.store.ListTokens(context.Background())
	for _, tk := range toks {
		if err := e.store.RevokeToken(context.Background(), tk.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for _, secret := range []string{"qt_unknown", revoked} {
		start := time.Now()
		res, body := get(t, e.client(), e.srv.URL+"/?token="+url.QueryEscape(secret))
		if res.StatusCode != http.StatusUnauthorized || cookieNamed(res, "quarantine_session") != nil {
			t.Fatalf("refused login: %d %v", res.StatusCode, res.Header["Set-Cookie"])
		}
		if strings.Contains(body, secret) {
			t.Fatal("the refused secret is echoed in the page")
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("refused after %v, want the delay", d)
		}
	}
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: quarantine.ActionAccessDenied})
	if err != nil {
		t.Fatal(err)
	}
	// Once a minute per client.
	if len(evs) != 1 || !strings.Contains(string(evs[0].Details), "ui.login_refused") {
		t.Fatalf("audit: %+v", evs)
	}
}

// A login link followed from another site does not log in (login CSRF).
func TestLoginBannerURLFromAnotherSiteIsRefused(t *testing.T) {
	e := newEnv(t)
	secret := e.token("admin", quarantine.RoleAdmin)
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/?token="+url.QueryEscape(secret), nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || cookieNamed(res, "quarantine_session") != nil {
		t.Fatalf("cross-site login link: %d %v", res.StatusCode, res.Header["Set-Cookie"])
	}
}

func TestWebMessagesScopedToOwnersAnd404(t *testing.T) {
	e := newEnv(t)
	a := e.message(quarantine.Message{Queue: "orders-a", Owner: "team-a", Payload: []byte(`{"n":1}`), Reason: "boom"})
	b := e.message(quarantine.Message{Queue: "orders-b", Owner: "team-b", Payload: []byte(`{"n":2}`), Reason: "bang"})
	c := e.client()
	e.login(c, e.token("b-viewer", quarantine.RoleViewer, "team-b"))
	_, body := get(t, c, e.srv.URL+"/messages")
	if !strings.Contains(body, b.ID) || strings.Contains(body, a.ID) || strings.Contains(body, "orders-a") {
		t.Fatalf("list not scoped to team-b: %s", body)
	}
	res, body := get(t, c, e.srv.URL+"/messages/"+a.ID)
	if res.StatusCode != http.StatusNotFound || strings.Contains(body, "orders-a") {
		t.Fatalf("another team's message: %d", res.StatusCode)
	}
	for _, p := range []string{"/messages/" + quarantine.NewID(time.Now()), "/messages/not-an-id", "/nowhere"} {
		if res, _ := get(t, c, e.srv.URL+p); res.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", p, res.StatusCode)
		}
	}
	res, body = get(t, c, e.srv.URL+"/messages/"+b.ID)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "&#34;n&#34;: 2") {
		t.Fatalf("own message: %d %s", res.StatusCode, body)
	}
}

func TestWebMessagesFilterAndKeysetPaging(t *testing.T) {
	e := newEnv(t)
	base := time.Now().Add(-time.Hour)
	ids := map[string]bool{}
	for i := 0; i < 55; i++ {
		m := e.message(quarantine.Message{Queue: "q1", JobName: "job", FailedAt: base.Add(time.Duration(i) * time.Second), Payload: []byte(`{}`)})
		ids[m.ID] = true
	}
	e.message(quarantine.Message{Queue: "q2", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	rowRE := regexp.MustCompile(`<tr data-id="([0-9A-Z]+)"`)
	nextRE := regexp.MustCompile(`id="next" href="([^"]+)"`)
	_, body := get(t, c, e.srv.URL+"/messages?queue=q1")
	first := rowRE.FindAllStringSubmatch(body, -1)
	next := nextRE.FindStringSubmatch(body)
	if len(first) != 50 || next == nil {
		t.Fatalf("first page: %d rows, next %v", len(first), next)
	}
	nu := strings.ReplaceAll(next[1], "&amp;", "&")
	if !strings.Contains(nu, "queue=q1") || !strings.Contains(nu, "cursor=") {
		t.Fatalf("next link %q", nu)
	}
	_, body = get(t, c, e.srv.URL+nu)
	second := rowRE.FindAllStringSubmatch(body, -1)
	if len(second) != 5 || nextRE.MatchString(body) {
		t.Fatalf("second page: %d rows", len(second))
	}
	seen := map[string]bool{}
	for _, r := range append(first, second...) {
		if !ids[r[1]] || seen[r[1]] {
			t.Fatalf("row %s: not a q1 message or repeated", r[1])
		}
		seen[r[1]] = true
	}
	if res, body := get(t, c, e.srv.URL+"/messages?status=bogus"); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "unknown status") {
		t.Fatalf("bad status: %d", res.StatusCode)
	}
	if res, _ := get(t, c, e.srv.URL+"/messages?cursor=xx"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", res.StatusCode)
	}
}

// Stored strings are escaped; a viewer sees the payload masked at the
// redaction pointers.
func TestWebPayloadEscapedAndHiddenFromViewersUnderRedaction(t *testing.T) {
	e := newEnv(t, func(c *web.Config) { c.RedactPointers = []string{"/card"} })
	m := e.message(quarantine.Message{Queue: `<b>q</b>`, Payload: []byte(`{"card":"4111","x":"<script>alert(1)</script>"}`), Reason: `"><img src=x onerror=alert(1)>`})
	bin := e.message(quarantine.Message{Queue: "bin", Payload: []byte{0xff, 0x00, '<'}, ContentType: "application/octet-stream"})
	admin, viewer := e.client(), e.client()
	e.login(admin, e.token("admin", quarantine.RoleAdmin))
	e.login(viewer, e.token("viewer", quarantine.RoleViewer))
	_, body := get(t, admin, e.srv.URL+"/messages/"+m.ID)
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>q</b>"} {
		if strings.Contains(body, bad) {
			t.Fatalf("unescaped %q in %s", bad, body)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;") || !strings.Contains(body, "4111") {
		t.Fatalf("payload not shown as text: %s", body)
	}
	_, body = get(t, viewer, e.srv.URL+"/messages/"+m.ID)
	if strings.Contains(body, "4111") || !strings.Contains(body, `id="payload-masked"`) ||
		!strings.Contains(body, "&#34;card&#34;: &#34;&lt;redacted&gt;&#34;") || !strings.Contains(body, "&lt;script&gt;alert(1)") {
		t.Fatalf("viewer must see the payload with /card masked: %s", body)
	}
	if res, _ := get(t, viewer, e.srv.URL+"/messages?q=4111"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer text search under redaction: %d, want 403", res.StatusCode)
	}
	_, body = get(t, admin, e.srv.URL+"/messages/"+bin.ID)
	if !strings.Contains(body, "payload-hex") || !strings.Contains(body, "ff 00 3c") {
		t.Fatalf("binary payload not in hex: %s", body)
	}
}

func TestWebStaticAssetsAtHashURLsCachedImmutably(t *testing.T) {
	e := newEnv(t)
	_, body := get(t, e.client(), e.srv.URL+"/login")
	m := regexp.MustCompile(`href="(/static/style\.[0-9a-f]{16}\.css)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no hashed stylesheet in %s", body)
	}
	res, css := get(t, e.client(), e.srv.URL+m[1])
	if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") || !strings.Contains(css, "body") {
		t.Fatalf("asset: %d %v", res.StatusCode, res.Header)
	}
	for _, p := range []string{"/static/style.css", "/static/style.0000000000000000.css"} {
		if res, _ := get(t, e.client(), e.srv.URL+p); res.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", p, res.StatusCode)
		}
	}
}

// A revoked token's sessions end at once.
func TestWebRevokedTokenEndsItsSessions(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	toks, _ := e.store.ListTokens(context.Background())
	if err := e.store.RevokeToken(context.Background(), toks[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	if res, _ := get(t, c, e.srv.URL+"/messages"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoked token's session: %d", res.StatusCode)
	}
}
