package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// TestServe_RefusedLoginsBehindProxyWrittenOnClose: behind a trusted
// proxy (the test, on loopback) a refused token is counted for the
// client X-Forwarded-For names, and its count, whose minute has not
// ended, is in the audit log once the service has stopped.
func TestServe_RefusedLoginsBehindProxyWrittenOnClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "q.db")
	cfg := writeConfig(t, "trusted_proxies: [127.0.0.0/8, \"::1\"]\n")
	m, _, stop := serve(t, "--config", cfg, "--database", "sqlite:"+path)
	req, err := http.NewRequest(http.MethodGet, "http://"+m.Addr()+"/api/v1/queues", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer qt_wrong")
	req.Header.Set("X-Forwarded-For", "192.0.2.44")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.StatusCode)
	}
	stop()

	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListAudit(ctx, quarantine.AuditFilter{Action: api.ActionAuthRefused})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Subject != "192.0.2.44" {
		t.Fatalf("auth.refused events after the stop %+v, want one for 192.0.2.44", evs)
	}
}
