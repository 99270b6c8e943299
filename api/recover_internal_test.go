package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine/store/sqlite"
)

func TestPanicIsALogged500(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	s := New(Config{Store: st, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := s.requestID(s.observe(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret internals")
	}))))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 500 || p.Status != 500 || p.Type != ProblemTypePrefix+"internal" || p.Detail != "internal error" ||
		rec.Header().Get("Content-Type") != "application/problem+json" || p.RequestID == "" {
		t.Fatalf("%d %+v", rec.Code, p)
	}
	if strings.Contains(rec.Body.String(), "secret internals") {
		t.Fatal("the panic value leaked into the response")
	}
	if !strings.Contains(logs.String(), "secret internals") || !strings.Contains(logs.String(), `"component":"api"`) ||
		!strings.Contains(logs.String(), p.RequestID) {
		t.Fatalf("panic not logged: %s", logs.String())
	}
}
