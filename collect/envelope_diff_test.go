package collect

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// FuzzDecodeEnvelopeMatchesReference checks the one-pass decoder against
// the encoding/json one it replaced (refDecodeEnvelope): the same message
// and the same problems for every input, except where the one-pass
// decoder now says more (a lone surrogate, a queue no broker could
// route) and where the reference's order was random (several bad
// headers, which it visited in map order).
func FuzzDecodeEnvelopeMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"envelope":"quarantine.failure/v1","job":{"id":"j","name":"a","queue":"q","idempotency_key":"k","schema_version":3,"attempts":2,"enqueued_at":"2026-01-01T00:00:00Z","headers":{"a":"b","c":1},"payload":{"x":[1,2.5e3,"\u00e9"]}},"failure":{"class":"permanent","reason":"r\n","failed_at":"2026-01-01T00:00:01Z"}}`,
		`{"envelope":"quarantine.failure/v1","job":{"name":"a","payload_base64":"AA=="},"job":{"name":"b","payload":null},"failure":null}`,
		`{"envelope":"quarantine.failure/v1","job":[1],"failure":"x"}`,
		`{"envelope":"quarantine.failure/v9"}`, `{"envelope":7}`, `{"envelope":null,"job":{}}`,
		`{"\u0065nvelope":"quarantine.failure/v1","job":{"n\u0061me":"x","headers":{"h":null,"h":"v"},"payload":1}}`,
		`{"envelope":"quarantine.failure/v1", oops}`, `{} {}`, `[1,2,3]`, `null`, ` "s" `, `{"a":1,}`, `{"a"}`, `1e999`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		o := Origin{Source: "fuzz", Kind: quarantine.SourceMemory, MaxPayloadBytes: 32}
		got, gotP := DecodeEnvelope(raw, o)
		want, wantP := refDecodeEnvelope(raw, o)
		if got.HasFlag(quarantine.FlagLoneSurrogate) || got.HasFlag(quarantine.FlagInvalidQueue) {
			return // the reference said nothing, or rewrote the queue
		}
		headerProblems := 0
		for _, p := range wantP {
			if strings.HasPrefix(p.Field, "/job/headers/") {
				headerProblems++
			}
		}
		if headerProblems > 1 {
			got.Reason, want.Reason = "", ""
			sortProblems(gotP)
			sortProblems(wantP)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
		}
		if !reflect.DeepEqual(gotP, wantP) {
			t.Fatalf("problems\n%+v\nwant\n%+v", gotP, wantP)
		}
	})
}

func sortProblems(ps []Problem) {
	slices.SortFunc(ps, func(a, b Problem) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
}
