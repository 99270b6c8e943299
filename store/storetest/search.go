package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// testSearch checks what Filter.Text (the API's q) matches, with the same
// answers on every store: the Unicode case folding of q as a substring of
// the reason, the job name or the current text payload; never a header,
// a binary payload or a payload version that is no longer current.
func testSearch(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	reasonDE := newMsg(withReason("Überlauf im Puffer"))
	jobGreek := newMsg(withReason("worker gave up"))
	jobGreek.JobName = "ΕΠΕΞΕΡΓΑΣΊΑ_ΠΛΗΡΩΜΉΣ"
	payloadRU := newMsg(withReason("worker gave up"), withPayload([]byte(`{"msg":"Ошибка соединения"}`)))
	sharp := newMsg(withReason("STRASSE gesperrt"))
	sigma := newMsg(withReason(`ΛΆΘΟΣ ΣΎΝΔΕΣΗΣ "ζ" 100%_ok`))
	header := newMsg(withReason("worker gave up"))
	header.Headers = map[string]string{"x-note": "zanzibar"}
	binary := newMsg(withReason("worker gave up"), withPayload([]byte("\xff\xfe quokka \x00")))
	msgs := []*quarantine.Message{reasonDE, jobGreek, payloadRU, sharp, sigma, header, binary}
	insert(t, s, msgs...)

	check := func(q string, want ...*quarantine.Message) {
		t.Helper()
		wantIDs := ids(want)
		slices.Reverse(wantIDs) // newest first: fixtures fail later in insertion order
		for _, limit := range []int{1000, 1} {
			got := ids(listAll(t, s, quarantine.Filter{Text: q, Limit: limit}))
			if !slices.Equal(got, wantIDs) {
				t.Errorf("q=%q (limit %d): got %v, want %v", q, limit, got, wantIDs)
			}
		}
		counts, err := s.CountByQueue(ctx, quarantine.Filter{Text: q})
		wantOK(t, err, "CountByQueue")
		var n int64
		for _, c := range counts {
			n += c.Count
		}
		if n != int64(len(want)) {
			t.Errorf("q=%q: CountByQueue counts %d, want %d", q, n, len(want))
		}
	}
	check("überlauf", reasonDE)
	check("ÜBERLAUF", reasonDE)
	check("üBERlauf IM", reasonDE)
	check("Üb", reasonDE) // shorter than a trigram
	check("επεξεργασία", jobGreek)
	check("_πληρωμής", jobGreek)
	check("ОШИБКА", payloadRU)
	check("ошибка соед", payloadRU)
	check("straße", sharp) // full case folding: ß is ss
	check("λάθος", sigma)  // final sigma folds as sigma
	check("ΛΆΘΟΣ σύν", sigma)
	check(`σ "Ζ" 100%_`, sigma) // quotes, % and _ are literal
	check("zanzibar")           // headers are not searched
	check("quokka")             // nor binary payloads
	check("gave up", jobGreek, payloadRU, header, binary)

	// Only the current payload version is searched.
	_, err := s.EditPayload(ctx, edit(payloadRU, payloadRU.PayloadSHA256, []byte(`{"msg":"Повтор УСПЕШЕН"}`)))
	wantOK(t, err, "EditPayload")
	check("ошибка")
	check("успешен", payloadRU)

	// A purged payload is no longer searched; the reason still is.
	setStatus(t, h, s, quarantine.StatusDiscarded, payloadRU)
	purged, err := s.PurgePayloads(ctx, quarantine.StatusDiscarded, time.Now().Add(24*time.Hour), 10, "retention")
	wantOK(t, err, "PurgePayloads")
	if !slices.Equal(purged.Purged, []string{payloadRU.ID}) {
		t.Fatalf("PurgePayloads purged %v, want %s", purged.Purged, payloadRU.ID)
	}
	check("успешен")
	check("gave up", jobGreek, payloadRU, header, binary)
}
