package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

// AuthConfig is the `auth:` key: how people sign in to the web UI.
// Sessions live in the database: every instance on it shares them, and
// a restart keeps them. A session ends after SessionIdle without use,
// and SessionMax after the login at the latest.
type AuthConfig struct {
	SessionIdle time.Duration
	SessionMax  time.Duration
	// OIDC, when set, signs people in through an OpenID Connect
	// provider (auth.oidc).
	OIDC *OIDCConfig
	// Proxy, when set, believes an identity-aware proxy's user and
	// groups headers from the trusted_proxies (auth.proxy).
	Proxy *web.ProxyConfig
}

// OIDCConfig is `auth.oidc`: the provider, this service as its client,
// and which groups get which role.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret Secret
	RedirectURL  string
	Scopes       []string
	GroupsClaim  string
	Roles        []quarantine.GroupRole
}

// web returns the UI's view of c.
func (c *OIDCConfig) web() *web.OIDCConfig {
	if c == nil {
		return nil
	}
	return &web.OIDCConfig{Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: c.ClientSecret.Reveal(),
		RedirectURL: c.RedirectURL, Scopes: c.Scopes, GroupsClaim: c.GroupsClaim, Roles: c.Roles}
}

// Bounds of the session timeouts: the idle deadline moves a minute at a
// time (quarantine.SessionRefresh), so a shorter idle timeout is not
// kept exactly.
const (
	minSessionIdle = time.Minute
	maxSessionMax  = 30 * 24 * time.Hour
)

type fileAuth struct {
	SessionIdle any        `yaml:"session_idle"`
	SessionMax  any        `yaml:"session_max"`
	OIDC        *fileOIDC  `yaml:"oidc"`
	Proxy       *fileProxy `yaml:"proxy"`
}

type fileProxy struct {
	UserHeader   string                 `yaml:"user_header"`
	GroupsHeader string                 `yaml:"groups_header"`
	Roles        []quarantine.GroupRole `yaml:"roles"`
}

type fileOIDC struct {
	Issuer           string                 `yaml:"issuer"`
	ClientID         string                 `yaml:"client_id"`
	ClientSecret     string                 `yaml:"client_secret"`
	ClientSecretFile string                 `yaml:"client_secret_file"`
	RedirectURL      string                 `yaml:"redirect_url"`
	Scopes           []string               `yaml:"scopes"`
	GroupsClaim      string                 `yaml:"groups_claim"`
	Roles            []quarantine.GroupRole `yaml:"roles"`
}

func defaultAuthConfig() AuthConfig {
	return AuthConfig{SessionIdle: web.DefaultSessionIdle, SessionMax: web.DefaultSessionMax}
}

// decodeAuth reads the auth keys that are set into a; proxies says
// whether trusted_proxies names any.
func (s *configSource) decodeAuth(f fileAuth, a *AuthConfig, proxies bool) error {
	for _, k := range []struct {
		key string
		v   any
		dst *time.Duration
	}{
		{"auth.session_idle", f.SessionIdle, &a.SessionIdle},
		{"auth.session_max", f.SessionMax, &a.SessionMax},
	} {
		if k.v == nil {
			continue
		}
		d, problem := parseRetention(k.v, false)
		if problem != "" {
			return s.errorf(k.key, "%s", problem)
		}
		*k.dst = d
	}
	switch {
	case a.SessionIdle < minSessionIdle:
		return s.errorf("auth.session_idle", "%s is too short: at least 1m", a.SessionIdle)
	case a.SessionMax > maxSessionMax:
		return s.errorf("auth.session_max", "%s is too long: at most 30d", a.SessionMax)
	case a.SessionMax < a.SessionIdle:
		return s.errorf("auth.session_max", "%s is shorter than auth.session_idle (%s)", a.SessionMax, a.SessionIdle)
	}
	if f.OIDC != nil {
		o, err := s.decodeOIDC(*f.OIDC)
		if err != nil {
			return err
		}
		a.OIDC = o
	}
	if f.Proxy != nil {
		p, err := s.decodeProxy(*f.Proxy, proxies)
		if err != nil {
			return err
		}
		a.Proxy = p
	}
	return nil
}

// decodeProxy checks auth.proxy.
func (s *configSource) decodeProxy(f fileProxy, proxies bool) (*web.ProxyConfig, error) {
	for _, h := range []struct{ key, v string }{
		{"auth.proxy.user_header", f.UserHeader}, {"auth.proxy.groups_header", f.GroupsHeader},
	} {
		if strings.TrimSpace(h.v) == "" || strings.ContainsAny(h.v, " :\t\r\n\x00") {
			return nil, s.errorf(h.key, "%q is not a header name (X-Forwarded-Email, X-Forwarded-Groups…)", h.v)
		}
	}
	if !proxies {
		return nil, s.errorf("auth.proxy", "name the proxy in trusted_proxies: its headers are believed from it alone")
	}
	if err := s.checkRoles("auth.proxy.roles", f.Roles); err != nil {
		return nil, err
	}
	return &web.ProxyConfig{UserHeader: f.UserHeader, GroupsHeader: f.GroupsHeader, Roles: f.Roles}, nil
}

// checkRoles checks a list of group mappings at key.
func (s *configSource) checkRoles(key string, roles []quarantine.GroupRole) error {
	if len(roles) == 0 {
		return s.errorf(key, "map at least one group to a role: without one nobody may sign in")
	}
	for i, r := range roles {
		if err := r.Validate(); err != nil {
			return s.errorf(fmt.Sprintf("%s[%d].%s", key, i, quarantine.ErrorField(err)), "%s", quarantine.ErrorMessage(err))
		}
	}
	return nil
}

// decodeOIDC checks auth.oidc and reads its secret file.
func (s *configSource) decodeOIDC(f fileOIDC) (*OIDCConfig, error) {
	if problem := checkProviderURL(f.Issuer); problem != "" {
		return nil, s.errorf("auth.oidc.issuer", "%s", problem)
	}
	if strings.TrimSpace(f.ClientID) == "" {
		return nil, s.errorf("auth.oidc.client_id", "the client id registered at the provider is required")
	}
	var secret Secret
	switch {
	case f.ClientSecret != "" && f.ClientSecretFile != "":
		return nil, s.errorf("auth.oidc.client_secret", "give client_secret or client_secret_file, not both")
	case f.ClientSecretFile != "":
		b, err := os.ReadFile(f.ClientSecretFile)
		if err != nil {
			return nil, s.errorf("auth.oidc.client_secret_file", "cannot read %q: %v", f.ClientSecretFile, err)
		}
		if secret = Secret(strings.TrimSpace(string(b))); secret == "" {
			return nil, s.errorf("auth.oidc.client_secret_file", "%q is empty", f.ClientSecretFile)
		}
	case f.ClientSecret != "":
		secret = Secret(f.ClientSecret)
	default:
		return nil, s.errorf("auth.oidc.client_secret", "give client_secret_file (or client_secret)")
	}
	if problem := checkProviderURL(f.RedirectURL); problem != "" {
		return nil, s.errorf("auth.oidc.redirect_url", "%s", problem)
	}
	if u, _ := url.Parse(f.RedirectURL); u.Path != "/auth/oidc/callback" {
		return nil, s.errorf("auth.oidc.redirect_url", "%q must end in /auth/oidc/callback (this service's callback)", f.RedirectURL)
	}
	for i, sc := range f.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n") {
			return nil, s.errorf(fmt.Sprintf("auth.oidc.scopes[%d]", i), "%q is not a scope", sc)
		}
	}
	if err := s.checkRoles("auth.oidc.roles", f.Roles); err != nil {
		return nil, err
	}
	return &OIDCConfig{Issuer: f.Issuer, ClientID: f.ClientID, ClientSecret: secret, RedirectURL: f.RedirectURL,
		Scopes: f.Scopes, GroupsClaim: f.GroupsClaim, Roles: f.Roles}, nil
}

// checkProviderURL returns a problem text unless u is an absolute https
// URL (or http to a loopback address, for tests and local providers).
func checkProviderURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.User != nil || p.RawQuery != "" || p.Fragment != "" {
		return fmt.Sprintf("%q is not an absolute URL (https://host/path)", u)
	}
	switch p.Scheme {
	case "https":
		return ""
	case "http":
		if ip := net.ParseIP(p.Hostname()); p.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
			return ""
		}
	}
	return fmt.Sprintf("%q must be https (http only to a loopback address)", u)
}
