package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/quarantine-dev/quarantine"
)

// OIDCConfig signs people in through an OpenID Connect provider (config
// auth.oidc): the authorization code flow with PKCE, state and nonce, the
// ID token verified against the provider's keys. A person gets the role
// and owners their groups map to (quarantine.RoleOfGroups); a person of
// no mapped group is refused (403, audited).
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this service's /auth/oidc/callback as the provider
	// knows it (https://quarantine.example.com/auth/oidc/callback).
	RedirectURL string
	// Scopes are asked for besides openid; nil means email and profile.
	Scopes []string
	// GroupsClaim names the ID token's claim that lists the person's
	// groups; "" means "groups".
	GroupsClaim string
	Roles       []quarantine.GroupRole
	// HTTPClient reaches the provider; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// DefaultGroupsClaim is the ID token claim read for groups by default.
const DefaultGroupsClaim = "groups"

// oidcCookie carries one sign-in's state, nonce and PKCE verifier from
// /auth/oidc/login to the callback. SameSite=Lax: the callback is a
// top-level navigation from the provider's site. Over HTTPS it carries
// the __Host- prefix, like the other cookies (cookieName).
const oidcCookie = "quarantine_oidc"

// oidcFlowSeconds is how long a browser may take at the provider.
const oidcFlowSeconds = 600

// sso is the relying party. The provider's discovery document is fetched
// on first use (and again after a failure), so that a provider that is
// down does not stop the service from starting.
type sso struct {
	cfg OIDCConfig

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
	// endSession is the provider's end_session_endpoint (RP-initiated
	// logout), "" when its discovery document names none.
	endSession string
}

func newSSO(cfg OIDCConfig) *sso {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"email", "profile"}
	}
	return &sso{cfg: cfg}
}

func (s *sso) context(ctx context.Context) context.Context {
	if s.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, s.cfg.HTTPClient)
	}
	return ctx
}

// provider returns the OAuth 2 configuration and the ID token verifier,
// discovering the provider the first time.
func (s *sso) provider(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauth != nil {
		return s.oauth, s.verifier, nil
	}
	p, err := oidc.NewProvider(s.context(ctx), s.cfg.Issuer)
	if err != nil {
		return nil, nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "the identity provider %s: %v", s.cfg.Issuer, err)
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, sc := range s.cfg.Scopes {
		if sc != oidc.ScopeOpenID && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	s.oauth = &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret,
		RedirectURL: s.cfg.RedirectURL, Endpoint: p.Endpoint(), Scopes: scopes}
	s.verifier = p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID})
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&meta); err == nil {
		s.endSession = meta.EndSession
	}
	return s.oauth, s.verifier, nil
}

// logoutURL is where a person signed in through the provider goes once
// their session ended here: the provider's end_session_endpoint (OpenID
// Connect RP-Initiated Logout 1.0) with this client's id and, as
// post_logout_redirect_uri, this service's /login (the redirect URL's
// origin; register it at the provider). "" when the provider names no
// such endpoint or cannot be reached: the person then lands on /login,
// still signed in at the provider.
func (s *sso) logoutURL(ctx context.Context) string {
	if _, _, err := s.provider(ctx); err != nil {
		return ""
	}
	s.mu.Lock()
	end := s.endSession
	s.mu.Unlock()
	u, err := url.Parse(end)
	if end == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	q := u.Query()
	q.Set("client_id", s.cfg.ClientID)
	if back, err := url.Parse(s.cfg.RedirectURL); err == nil && back.Host != "" {
		q.Set("post_logout_redirect_uri", (&url.URL{Scheme: back.Scheme, Host: back.Host, Path: "/login"}).String())
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ssoLogin starts a sign-in: a fresh state, nonce and PKCE verifier in
// the flow cookie, then off to the provider.
func (h *Handler) ssoLogin(w http.ResponseWriter, r *http.Request) {
	oc, _, err := h.sso.provider(r.Context())
	if err != nil {
		h.log.Error("sso", "err", err)
		h.renderLogin(w, r, http.StatusBadGateway, "The identity provider cannot be reached; try again, or log in with a token.")
		return
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(r, oidcCookie), Value: state + "." + nonce + "." + verifier, Path: "/",
		MaxAge: oidcFlowSeconds, HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, oc.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
}

// ssoCallback finishes a sign-in: the state must be this browser's, the
// code is exchanged with its PKCE verifier, the ID token verified (issuer,
// audience, expiry, signature by the provider's keys) and its nonce
// checked. The person's groups decide their role; without one they are
// refused with a 403 page, and the refusal is audited.
func (h *Handler) ssoCallback(w http.ResponseWriter, r *http.Request) {
	spent := &http.Cookie{Name: h.cookieName(r, oidcCookie), Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: h.secure(r), SameSite: http.SameSiteLaxMode}
	var state, nonce, verifier string
	if v := h.cookie(r, oidcCookie); v != "" {
		parts := strings.Split(v, ".")
		if len(parts) == 3 {
			state, nonce, verifier = parts[0], parts[1], parts[2]
		}
	}
	http.SetCookie(w, spent) // one use
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.renderLogin(w, r, http.StatusUnauthorized, "The identity provider did not sign you in ("+truncate(100, e)+").")
		return
	}
	got := q.Get("state")
	if state == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(state)) != 1 {
		h.renderLogin(w, r, http.StatusForbidden, "This sign-in expired or was started in another browser; sign in again.")
		return
	}
	ctx := h.sso.context(r.Context())
	oc, idv, err := h.sso.provider(ctx)
	if err != nil {
		h.log.Error("sso", "err", err)
		h.renderLogin(w, r, http.StatusBadGateway, "The identity provider cannot be reached; try again, or log in with a token.")
		return
	}
	tok, err := oc.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		h.log.Warn("sso: code exchange refused", "err", err)
		h.renderLogin(w, r, http.StatusForbidden, "The identity provider refused this sign-in; sign in again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := idv.Verify(ctx, raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		h.log.Warn("sso: ID token refused", "err", err)
		h.renderLogin(w, r, http.StatusForbidden, "The identity provider's answer could not be verified; sign in again.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		h.fail(w, r, nil, quarantine.Internal(err, "sso: ID token claims"))
		return
	}
	person := "oidc:" + idt.Subject
	if email, _ := claims["email"].(string); email != "" {
		person = "oidc:" + email
	}
	person = quarantine.SanitizeText(truncate(300, person))
	groups := groupsOf(claims[h.sso.cfg.GroupsClaim])
	role, owners, ok := quarantine.RoleOfGroups(h.sso.cfg.Roles, groups)
	if !ok {
		h.refuseSSO(w, r, person, groups)
		return
	}
	id, err := h.startSession(r, &quarantine.Session{Person: person, Role: role, Owners: owners})
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	ev := quarantine.NewAuditEvent(person, quarantine.ActionLogin, "/auth/oidc/callback", map[string]any{
		"method": "oidc", "role": role, "owners": owners, "groups": auditGroups(groups), "client": h.cfg.TrustedProxies.ClientIP(r)})
	if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		// No sign-in without its audit event: the session ends unused.
		_ = h.cfg.Store.DeleteSession(context.WithoutCancel(r.Context()), quarantine.HashSessionID(id))
		h.fail(w, r, nil, err)
		return
	}
	h.setCookie(w, r, sessionCookie, id, 0)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, home, http.StatusSeeOther)
}

// refuseSSO audits and refuses a person none of whose groups has a role.
func (h *Handler) refuseSSO(w http.ResponseWriter, r *http.Request, person string, groups []string) {
	ev := quarantine.NewAuditEvent(person, quarantine.ActionAccessDenied, "/auth/oidc/callback", map[string]any{
		"method": r.Method, "path": r.URL.Path, "reason": "ui.sso_no_role", "groups": auditGroups(groups),
		"client": h.cfg.TrustedProxies.ClientIP(r)})
	if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	msg := "You signed in as " + strings.TrimPrefix(person, "oidc:") +
		", but none of your groups is given a role in quarantine, so you cannot use it. Ask an administrator to map one of your groups (auth.oidc.roles)."
	h.render(w, r, http.StatusForbidden, "error", page{Title: "Not allowed", Error: msg})
}

// auditGroups is the groups an audit event lists: the first 50.
func auditGroups(groups []string) []string {
	if len(groups) > 50 {
		return groups[:50]
	}
	return groups
}

// groupsOf reads a groups claim: a list of strings, or one string.
func groupsOf(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, g := range x {
			if s, ok := g.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
