package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// withWeb serves the API's paths (/api/…, /metrics, /healthz, /readyz)
// with apiHandler, exactly as before, and every other path with the web
// UI, on the same server. The UI edits and replays with the API's rules
// (acfg).
func (m *Main) withWeb(apiHandler http.Handler, acfg api.Config) (http.Handler, error) {
	ui, err := web.New(web.Config{
		Store:          m.store,
		Logger:         m.logger,
		Now:            time.Now,
		RedactPointers: m.Config.RedactPointers,
		Owners:         m.Config.Owners,
		Alarms:         m.Config.Alarms.Rules,
		Edit:           rules.EditRules{Preparer: acfg.Preparer, Schemas: acfg.Schemas},
		Replay:         acfg.Replay,
		Discards:       acfg.Discards,
		SessionIdle:    m.Config.Auth.SessionIdle,
		SessionMax:     m.Config.Auth.SessionMax,
		OIDC:           m.Config.Auth.OIDC.web(),
		Proxy:          m.Config.Auth.Proxy,
		// The cookies are Secure, and __Host- prefixed, on requests that
		// arrive over TLS (tls: in the config), or from a trusted proxy
		// that says the client used HTTPS.
		TrustedProxies: m.Config.TrustedProxies,
	})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAPIPath(r.URL.Path) {
			apiHandler.ServeHTTP(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	}), nil
}

// isAPIPath reports whether the API answers path.
func isAPIPath(p string) bool {
	switch p {
	case "/api", "/metrics", "/healthz", "/readyz":
		return true
	}
	return strings.HasPrefix(p, "/api/")
}
