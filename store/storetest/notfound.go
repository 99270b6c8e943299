package storetest

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// testNotFound: a missing record is ENOTFOUND with the same message in
// every store (store/internal/notfound), whether the id is unknown or
// could not be an id at all.
func testNotFound(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	m := newMsg()
	insert(t, s, m)
	unknown, hostile := quarantine.NewID(baseTime), "no\xffid"
	want := func(what string, err error, nf *quarantine.Error) {
		t.Helper()
		wantCode(t, err, quarantine.ENOTFOUND)
		if got := quarantine.ErrorMessage(err); got != nf.Message {
			t.Errorf("%s: %q, want %q", what, got, nf.Message)
		}
	}
	for _, id := range []string{unknown, hostile} {
		_, err := s.GetMessage(ctx, id)
		want("GetMessage", err, notfound.Message(id))
		_, err = s.PayloadVersions(ctx, id)
		want("PayloadVersions", err, notfound.Message(id))
		_, err = s.PayloadVersion(ctx, id, 1)
		want("PayloadVersion", err, notfound.PayloadVersion(id, 1))
		_, err = s.EditPayload(ctx, quarantine.PayloadEdit{MessageID: id, IfMatch: m.PayloadSHA256,
			Payload: []byte(`{"n":2}`), Reason: "fix", Actor: "alice"})
		want("EditPayload", err, notfound.Message(id))
		want("RevokeToken", s.RevokeToken(ctx, id, "alice"), notfound.TokenID(id))
		if r, ok := s.(store.Replays); ok {
			_, err = r.GetReplay(ctx, id)
			want("GetReplay", err, notfound.Replay(id))
		}
	}
	_, err := s.PayloadVersion(ctx, m.ID, 9)
	want("PayloadVersion of a missing version", err, notfound.PayloadVersion(m.ID, 9))
	_, err = s.TokenBySecretHash(ctx, quarantine.HashTokenSecret("qt_nobody"))
	want("TokenBySecretHash", err, notfound.Token())
	if a, ok := s.(store.Alarms); ok {
		want("RecordAlarmDelivery", a.RecordAlarmDelivery(ctx, 987654, quarantine.AlarmAttempt{Delivered: true}), notfound.AlarmNotification(987654))
	}
}
