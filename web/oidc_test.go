package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
	"github.com/quarantine-dev/quarantine/web"
)

// ssoRoles is the group mapping of the SSO tests.
var ssoRoles = []quarantine.GroupRole{
	{Group: "pay-ops", Role: quarantine.RoleOperator, Owners: []string{"payments"}},
	{Group: "bill-viewers", Role: quarantine.RoleViewer, Owners: []string{"billing"}},
}

// ssoEnv is the UI with single sign-on through a real OpenID provider
// (mockoidc: discovery, keys, the code flow with PKCE) on loopback.
// Middleware, when given, wraps the provider's endpoints (to tamper with
// its answers).
func ssoEnv(t *testing.T, middleware ...func(http.Handler) http.Handler) (*env, *mockoidc.MockOIDC) {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mw := range middleware {
		if err := m.AddMiddleware(mw); err != nil {
			t.Fatal(err)
		}
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(pln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	pc := m.Config()
	e := newEnv(t, func(c *web.Config) {
		c.OIDC = &web.OIDCConfig{Issuer: pc.Issuer, ClientID: pc.ClientID, ClientSecret: pc.ClientSecret,
			RedirectURL: base + "/auth/oidc/callback", Scopes: []string{"email", "groups"}, Roles: ssoRoles}
	})
	// Serve the same handler on the address the redirect URL names.
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: e.srv.Config.Handler}}
	srv.Start()
	t.Cleanup(srv.Close)
	e.srv = srv
	return e, m
}

// ssoClient is a browser-like client that follows redirects, except to
// the callback when stop is set (to tamper with it).
func ssoClient(e *env, stop bool) *http.Client {
	c := e.client()
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if stop && req.URL.Path == "/auth/oidc/callback" {
			return http.ErrUseLastResponse
		}
		if req.URL.Path == "/overview" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return c
}

func auditOf(t *testing.T, e *env, action string) []quarantine.AuditEvent {
	t.Helper()
	evs, err := e.store.ListAudit(context.Background(), quarantine.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A person signs in through the provider and gets the highest role of
// their mapped groups and the union of their owners; the session is a
// database session like a token's.
func TestSSOSignInMapsGroupsToRoleAndOwners(t *testing.T) {
	t.Parallel()
	e, m := ssoEnv(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", Email: "alice@example.com", Groups: []string{"staff", "bill-viewers", "pay-ops"}})
	c := ssoClient(e, false)
	_, body := get(t, c, e.srv.URL+"/login")
	if !strings.Contains(body, `href="/auth/oidc/login"`) || !strings.Contains(body, "Sign in with SSO") {
		t.Fatalf("the login page offers no SSO: %s", body)
	}
	res, _ := get(t, c, e.srv.URL+"/auth/oidc/login")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
		t.Fatalf("sign-in ended with %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = get(t, c, e.srv.URL+"/messages")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "oidc:alice@example.com (operator: billing, payments)") {
		t.Fatalf("/messages after SSO: %d %s", res.StatusCode, body)
	}
	// The sign-in is audited under the person, with what it gave them.
	logins := auditOf(t, e, quarantine.ActionLogin)
	if len(logins) != 1 || logins[0].Actor != "oidc:alice@example.com" || logins[0].Subject != "/auth/oidc/callback" {
		t.Fatalf("auth.login events: %+v", logins)
	}
	var d map[string]any
	if err := json.Unmarshal(logins[0].Details, &d); err != nil || d["method"] != "oidc" || d["role"] != string(quarantine.RoleOperator) ||
		fmt.Sprint(d["owners"]) != "[billing payments]" || fmt.Sprint(d["groups"]) != "[staff bill-viewers pay-ops]" {
		t.Errorf("auth.login details: %s (%v)", logins[0].Details, err)
	}
	// An instance on the same database without SSO configured does not
	// take the person's session.
	plain := serveUI(t, e.store)
	other := e.client()
	pu, _ := url.Parse(plain.URL)
	other.Jar.SetCookies(pu, []*http.Cookie{{Name: "quarantine_session", Value: sessionCookieOf(c, e.srv.URL), Path: "/"}})
	if loggedIn(t, other, plain.URL) {
		t.Fatal("an SSO session opens an instance without SSO")
	}
}

// The callback refuses a state that is not the browser's, and a callback
// reached without the sign-in's cookie (another browser).
func TestSSOCallbackChecksState(t *testing.T) {
	t.Parallel()
	e, m := ssoEnv(t)
	for _, tamper := range []string{"state", "cookie"} {
		t.Run(tamper, func(t *testing.T) {
			m.QueueUser(&mockoidc.MockUser{Subject: "u-2", Email: "mallory@example.com", Groups: []string{"pay-ops"}})
			c := ssoClient(e, true)
			res, _ := get(t, c, e.srv.URL+"/auth/oidc/login")
			if res.StatusCode != http.StatusFound {
				t.Fatalf("provider answered %d, want 302 to the callback", res.StatusCode)
			}
			cb, err := url.Parse(res.Header.Get("Location"))
			if err != nil || cb.Query().Get("code") == "" || cb.Query().Get("state") == "" {
				t.Fatalf("callback URL %q", res.Header.Get("Location"))
			}
			if tamper == "state" {
				q := cb.Query()
				q.Set("state", "forged")
				cb.RawQuery = q.Encode()
			} else {
				c = ssoClient(e, true) // a browser without the sign-in's cookie
			}
			res, body := get(t, c, cb.String())
			if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "sign in again") {
				t.Fatalf("tampered callback (%s): %d %s", tamper, res.StatusCode, body)
			}
			if sessionCookieOf(c, e.srv.URL) != "" {
				t.Fatalf("tampered callback (%s) set a session", tamper)
			}
		})
	}
}

// TestSSOBrowserFlow: in headless Chromium, "Sign in with SSO" goes to
// the provider and back, the person acts (a discard, audited under
// oidc:their email), logs out; a person of no mapped group gets a clear
// 403 page, and the refusal is audited.
func TestSSOBrowserFlow(t *testing.T) {
	b := browsertest.New(t)
	e, m := ssoEnv(t)
	msg := e.message(quarantine.Message{Queue: "payments.charge", JobName: "charge", Owner: "payments", Payload: []byte(`{"n":1}`)})

	m.QueueUser(&mockoidc.MockUser{Subject: "u-3", Email: "alice@example.com", Groups: []string{"pay-ops"}})
	b.Do(chromedp.Navigate(e.srv.URL+"/login"), chromedp.WaitVisible(chromedp.ID("sso")))
	b.Screenshot("login-sso")
	b.Do(chromedp.Click(chromedp.ID("sso")), chromedp.WaitVisible(chromedp.ID("queues")))
	if loc := browsertest.Run(b, chromedp.Evaluate[string](`location.pathname + location.search`)); loc != "/overview" {
		t.Fatalf("after SSO the browser is at %q", loc)
	}
	who := browsertest.Run(b, chromedp.Text(chromedp.CSS(".who")))
	if who != "oidc:alice@example.com (operator: payments)" {
		t.Fatalf("signed in as %q", who)
	}
	b.Do(chromedp.Navigate(e.srv.URL+"/messages/"+msg.ID), chromedp.WaitVisible(chromedp.ID("discard-reason")))
	b.Do(chromedp.SendKeys(chromedp.ID("discard-reason"), "duplicate charge"), chromedp.Click(chromedp.ID("discard")),
		chromedp.WaitVisible(chromedp.CSS(".ev-actor")))
	evs := auditOf(t, e, quarantine.ActionDiscard)
	if len(evs) != 1 || evs[0].Actor != "oidc:alice@example.com" || evs[0].Subject != msg.ID {
		t.Fatalf("discard events %+v, want one by oidc:alice@example.com", evs)
	}
	b.Do(chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("sso")))

	m.QueueUser(&mockoidc.MockUser{Subject: "u-4", Email: "bob@example.com", Groups: []string{"staff", "interns"}})
	b.Do(chromedp.Click(chromedp.ID("sso")), chromedp.WaitVisible(chromedp.CSS("main")))
	text := browsertest.Run(b, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(text, "You signed in as bob@example.com, but none of your groups is given a role") {
		t.Fatalf("refusal page: %q", text)
	}
	b.Screenshot("sso-no-role")
	b.Do(chromedp.Navigate(e.srv.URL+"/messages"), chromedp.WaitVisible(chromedp.ID("sso")))
	var refused *quarantine.AuditEvent
	for _, ev := range auditOf(t, e, quarantine.ActionAccessDenied) {
		if ev.Actor == "oidc:bob@example.com" {
			refused = &ev
		}
	}
	if refused == nil {
		t.Fatal("the refused sign-in is not audited")
	}
	var d struct {
		Reason string   `json:"reason"`
		Groups []string `json:"groups"`
	}
	if err := json.Unmarshal(refused.Details, &d); err != nil || d.Reason != "ui.sso_no_role" || strings.Join(d.Groups, ",") != "staff,interns" {
		t.Fatalf("refusal details %s (%v)", refused.Details, err)
	}
}

// signIn runs the flow with c and returns the callback's answer.
func signIn(t *testing.T, e *env, c *http.Client) (*http.Response, string) {
	t.Helper()
	return get(t, c, e.srv.URL+"/auth/oidc/login")
}

// An ID token whose nonce is not the one this sign-in sent is refused.
func TestSSORefusesAnotherNonce(t *testing.T) {
	t.Parallel()
	e, m := ssoEnv(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.AuthorizationEndpoint {
				q := r.URL.Query()
				q.Set("nonce", "a-nonce-of-another-sign-in")
				r.URL.RawQuery = q.Encode()
			}
			next.ServeHTTP(w, r)
		})
	})
	m.QueueUser(&mockoidc.MockUser{Subject: "u-5", Email: "alice@example.com", Groups: []string{"pay-ops"}})
	c := ssoClient(e, false)
	res, body := signIn(t, e, c)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "could not be verified") || sessionCookieOf(c, e.srv.URL) != "" {
		t.Fatalf("another nonce: %d %s", res.StatusCode, body)
	}
}

// An ID token signed by a key that is not the provider's is refused.
func TestSSORefusesForeignSignature(t *testing.T) {
	t.Parallel()
	foreign, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	e, m := ssoEnv(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != mockoidc.TokenEndpoint {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var body map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			raw, _ := body["id_token"].(string)
			if raw == "" { // an error (the client tries its ways to authenticate): as is
				w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
			claims := jwt.MapClaims{}
			if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
				t.Errorf("id_token: %v in %s", err, rec.Body.String())
				return
			}
			forged, err := foreign.SignJWT(claims)
			if err != nil {
				t.Errorf("sign: %v", err)
				return
			}
			body["id_token"] = forged
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		})
	})
	m.QueueUser(&mockoidc.MockUser{Subject: "u-6", Email: "alice@example.com", Groups: []string{"pay-ops"}})
	c := ssoClient(e, false)
	res, body := signIn(t, e, c)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "could not be verified") || sessionCookieOf(c, e.srv.URL) != "" {
		t.Fatalf("foreign signature: %d %s", res.StatusCode, body)
	}
}

// Over HTTPS the sign-in's flow cookie is __Host- prefixed, Secure,
// HttpOnly, Path=/ and SameSite=Lax (the provider's redirect back is a
// cross-site navigation), and lives as long as a sign-in may take.
func TestSSOFlowCookieOverHTTPS(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(pln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	pc := m.Config()
	e := newEnv(t, func(c *web.Config) {
		c.Secure = true
		c.OIDC = &web.OIDCConfig{Issuer: pc.Issuer, ClientID: pc.ClientID, ClientSecret: pc.ClientSecret,
			RedirectURL: "https://quarantine.example.com/auth/oidc/callback", Roles: ssoRoles}
	})
	res, _ := get(t, e.client(), e.srv.URL+"/auth/oidc/login")
	ck := cookieNamed(res, "__Host-quarantine_oidc")
	if res.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("%d, cookies %v", res.StatusCode, res.Header["Set-Cookie"])
	}
	if !ck.Secure || !ck.HttpOnly || ck.Path != "/" || ck.Domain != "" || ck.SameSite != http.SameSiteLaxMode || ck.MaxAge != 600 {
		t.Fatalf("flow cookie %+v", ck)
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), pc.Issuer) {
		t.Fatalf("redirect to %q, want the provider", res.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" ||
		strings.Contains(ck.Value, q.Get("code_challenge")) || !strings.HasPrefix(ck.Value, q.Get("state")+".") {
		t.Fatalf("authorization request %v with flow cookie %q: want S256 PKCE, a nonce, the cookie's state", q, ck.Value)
	}
}

// endSessionProvider makes the provider's discovery document advertise
// end as its end_session_endpoint.
func endSessionProvider(end string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != mockoidc.DiscoveryEndpoint {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			doc["end_session_endpoint"] = end
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		})
	}
}

// Logging out a person signed in through the provider ends the session
// here and sends the browser to the provider's end_session_endpoint
// (RP-initiated logout) with this client's id and /login to come back
// to; a token's session still just lands on /login.
func TestSSOLogoutEndsTheProviderSession(t *testing.T) {
	t.Parallel()
	// The provider's end-session endpoint, as a provider serves it: it
	// ends its session and sends the browser back.
	ended := make(chan url.Values, 1)
	end := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ended <- r.URL.Query():
		default:
		}
		http.Redirect(w, r, r.URL.Query().Get("post_logout_redirect_uri"), http.StatusFound)
	}))
	t.Cleanup(end.Close)
	e, m := ssoEnv(t, endSessionProvider(end.URL+"/oidc/end_session"))
	m.QueueUser(&mockoidc.MockUser{Subject: "u-7", Email: "alice@example.com", Groups: []string{"pay-ops"}})
	c := ssoClient(e, false)
	get(t, c, e.srv.URL+"/auth/oidc/login")
	_, body := get(t, c, e.srv.URL+"/messages")
	still := e.client() // c's cookies, no redirect followed
	still.Jar = c.Jar
	res, _ := postForm(t, still, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /logout: %d", res.StatusCode)
	}
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil || to.Path != "/oidc/end_session" || to.Query().Get("client_id") != m.Config().ClientID ||
		to.Query().Get("post_logout_redirect_uri") != e.srv.URL+"/login" {
		t.Fatalf("logout sent the browser to %q", res.Header.Get("Location"))
	}
	if loggedIn(t, still, e.srv.URL) {
		t.Fatal("still logged in here after logging out")
	}
	// The browser follows: the provider ends its session and sends it
	// back to the login page.
	res, _ = get(t, still, to.String())
	var q url.Values
	select {
	case q = <-ended:
	default:
	}
	if q.Get("client_id") != m.Config().ClientID || res.StatusCode != http.StatusFound || res.Header.Get("Location") != e.srv.URL+"/login" {
		t.Fatalf("the provider got %v and answered %d to %q", q, res.StatusCode, res.Header.Get("Location"))
	}

	// A token's session logs out to /login, SSO or not.
	tc := e.client()
	e.login(tc, e.token("ops", quarantine.RoleOperator))
	_, body = get(t, tc, e.srv.URL+"/messages")
	res, _ = postForm(t, tc, e.srv.URL+"/logout", url.Values{"csrf": {csrf(t, body)}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("a token's logout: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}
