package web

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// The error page takes its status from the one table of the API and the
// UI (rules.ErrorStatus): a missing message, a conflict or a refused edit
// is not a 500. A client error shows its message; a server error is
// logged and shows none of its details.
func TestWebErrorStatusesAreTheAPIs(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/q.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logged bytes.Buffer
	h, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const detail = "detail-of-the-error"
	for _, tc := range []struct {
		code   string
		status int
		shown  bool // the error's message is on the page
		logged bool
	}{
		{quarantine.EINVALID, http.StatusBadRequest, true, false},
		{quarantine.EFORBIDDEN, http.StatusForbidden, true, false},
		{quarantine.ENOTFOUND, http.StatusNotFound, true, false},
		{quarantine.ECONFLICT, http.StatusConflict, true, false},
		{quarantine.EUNPROCESSABLE, http.StatusUnprocessableEntity, true, false},
		{quarantine.EPRECONDITION, http.StatusPreconditionFailed, true, false},
		{quarantine.ETOOLARGE, http.StatusRequestEntityTooLarge, true, false},
		{quarantine.EUNAVAILABLE, http.StatusServiceUnavailable, false, false},
		{quarantine.EINTERNAL, http.StatusInternalServerError, false, true},
	} {
		logged.Reset()
		if got := rules.ErrorStatus(tc.code); got != tc.status {
			t.Fatalf("%s: the table says %d, the case %d", tc.code, got, tc.status)
		}
		w := httptest.NewRecorder()
		h.fail(w, httptest.NewRequest(http.MethodGet, "/messages", nil), nil, quarantine.Errorf(tc.code, "%s", detail))
		body := w.Body.String()
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.code, w.Code, tc.status)
		}
		if strings.Contains(body, detail) != tc.shown {
			t.Errorf("%s: the message shown is %v, want %v:\n%s", tc.code, !tc.shown, tc.shown, body)
		}
		if tc.status >= 500 && !strings.Contains(body, "try again") && !strings.Contains(body, "it was logged") {
			t.Errorf("%s: the page says nothing of the failure:\n%s", tc.code, body)
		}
		if (logged.Len() > 0) != tc.logged {
			t.Errorf("%s: logged %q, want logged %v", tc.code, logged.String(), tc.logged)
		}
	}
}
