package api

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// MetricsAuth are the credentials /metrics asks for: a bearer token, or
// a user and password for HTTP basic auth, or both (either is accepted).
type MetricsAuth struct {
	Token    string
	User     string
	Password string
}

func (a *MetricsAuth) enabled() bool { return a != nil && (a.Token != "" || a.User != "") }

// protectMetrics answers 401 problem+json (with WWW-Authenticate) unless
// the request carries the configured credentials; h otherwise.
// Comparisons take constant time.
func (s *Server) protectMetrics(h http.Handler) http.Handler {
	a := s.cfg.MetricsAuth
	if !a.enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.allows(r) {
			h.ServeHTTP(w, r)
			return
		}
		if a.User != "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="quarantine metrics"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quarantine metrics"`)
		}
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EUNAUTHORIZED, "Authorization", "/metrics needs the configured bearer token or basic auth"))
	})
}

func (a *MetricsAuth) allows(r *http.Request) bool {
	if a.Token != "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(tok, a.Token) {
			return true
		}
	}
	if a.User != "" {
		if u, p, ok := r.BasicAuth(); ok && equal(u, a.User) && equal(p, a.Password) {
			return true
		}
	}
	return false
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
