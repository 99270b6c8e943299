package api_test

import (
	"net/http"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

func TestVersionsOfIngestedMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"a": 1}`)
	orders := e.ingestOne("orders.x", "ship", `{"b": 2}`)
	vs := e.versions(id, e.viewer)
	if len(vs) != 1 || vs[0].Version != 1 || vs[0].SHA256 != sha([]byte(`{"a": 1}`)) || vs[0].PrevSHA256 != "" || vs[0].MessageID != id || vs[0].Size != 8 {
		t.Fatalf("versions %+v", vs)
	}
	r := e.get("/api/v1/messages/"+id+"/versions/1", e.viewer).want(t, http.StatusOK)
	if r.header.Get("ETag") != `"`+vs[0].SHA256+`"` {
		t.Fatalf("ETag %q", r.header.Get("ETag"))
	}
	payments := e.token("payments-viewer", quarantine.RoleViewer, "payments")
	for _, tc := range []struct {
		target, secret string
		status         int
		field          string
	}{
		{"/api/v1/messages/" + id + "/versions/2", e.viewer, 404, "version"},
		{"/api/v1/messages/" + id + "/versions/0", e.viewer, 404, "version"},
		{"/api/v1/messages/" + id + "/versions/-1", e.viewer, 404, "version"},
		{"/api/v1/messages/" + id + "/versions/1e3", e.viewer, 404, "version"},
		{"/api/v1/messages/" + id + "/versions/99999999999999999999", e.viewer, 404, "version"},
		{"/api/v1/messages/" + id + "/versions/one", e.viewer, 404, "version"},
		{"/api/v1/messages/" + quarantine.NewID(baseTime) + "/versions", e.viewer, 404, "id"},
		{"/api/v1/messages/" + quarantine.NewID(baseTime) + "/versions/1", e.viewer, 404, "id"},
		{"/api/v1/messages/" + orders + "/versions", payments, 404, "id"},
		{"/api/v1/messages/" + orders + "/versions/1", payments, 404, "id"},
		{"/api/v1/messages/" + id + "/versions?all=1", e.viewer, 400, "all"},
	} {
		e.get(tc.target, tc.secret).problem(t, tc.status, tc.field)
	}
}

// TestETagNotModified: If-None-Match with the payload's ETag is 304.
func TestETagNotModified(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.ingestOne("billing", "charge", `{"a": 1}`)
	tag := `"` + sha([]byte(`{"a": 1}`)) + `"`
	for _, inm := range []string{tag, `"x", ` + tag, "W/" + tag, "*"} {
		r := e.do(http.MethodGet, "/api/v1/messages/"+id, e.viewer, nil, "If-None-Match", inm)
		if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != tag {
			t.Fatalf("If-None-Match %s: %d %q %s", inm, r.status, r.header.Get("ETag"), r.body)
		}
	}
	if r := e.do(http.MethodGet, "/api/v1/messages/"+id, e.viewer, nil, "If-None-Match", `"`+sha(nil)+`"`); r.status != http.StatusOK {
		t.Fatalf("another ETag: %d", r.status)
	}
}
