package quarantine_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// envelopeVector is one case of testdata/envelope_v1.json.
type envelopeVector struct {
	Name    string `json:"name"`
	Message struct {
		MessageID      string     `json:"message_id"`
		JobName        string     `json:"job_name"`
		Queue          string     `json:"queue"`
		IdempotencyKey string     `json:"idempotency_key"`
		SchemaVersion  string     `json:"schema_version"`
		Attempts       int        `json:"attempts"`
		ContentType    string     `json:"content_type"`
		EnqueuedAt     *time.Time `json:"enqueued_at"`
		FailedAt       time.Time  `json:"failed_at"`
		FirstFailedAt  *time.Time `json:"first_failed_at"`
		FailureClass   string     `json:"failure_class"`
		Reason         string     `json:"reason"`
	} `json:"message"`
	Payload []byte            `json:"payload_base64"`
	Headers map[string]string `json:"headers"`
	Want    string            `json:"want"`
}

func (v envelopeVector) message() *quarantine.Message {
	m := v.Message
	return &quarantine.Message{MessageID: m.MessageID, JobName: m.JobName, Queue: m.Queue,
		IdempotencyKey: m.IdempotencyKey, SchemaVersion: m.SchemaVersion, Attempts: m.Attempts,
		ContentType: m.ContentType, EnqueuedAt: m.EnqueuedAt, FailedAt: m.FailedAt,
		FirstFailedAt: m.FirstFailedAt, FailureClass: quarantine.FailureClass(m.FailureClass), Reason: m.Reason,
		// Ignored by the encoder: the payload and headers are the arguments.
		Payload: []byte("stale"), Headers: map[string]string{"stale": "1"}}
}

func TestMarshalEnvelopeKnownAnswers(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/envelope_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []envelopeVector `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 3 {
		t.Fatalf("testdata/envelope_v1.json holds %d cases", len(file.Cases))
	}
	for _, v := range file.Cases {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			m := v.message()
			got, err := quarantine.MarshalEnvelope(m, v.Payload, v.Headers)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.Want {
				t.Fatalf("envelope\n got %s\nwant %s", got, v.Want)
			}
			checkRoundTrip(t, m, v.Payload, v.Headers, got)
		})
	}
}

// checkRoundTrip decodes env with the collectors' decoder and compares
// every field the envelope carries.
func checkRoundTrip(t *testing.T, m *quarantine.Message, payload []byte, headers map[string]string, env []byte) {
	t.Helper()
	d, problems := collect.DecodeEnvelope(env, collect.Origin{Source: "test", Kind: quarantine.SourceHTTP})
	if len(problems) > 0 {
		t.Fatalf("decoding %s: %v", env, problems)
	}
	if !bytes.Equal(d.Payload, payload) && !(len(d.Payload) == 0 && len(payload) == 0) {
		t.Errorf("payload %q, want %q", d.Payload, payload)
	}
	wantCT := m.ContentType
	if wantCT == "" {
		wantCT = d.ContentType // the decoder's default for the form chosen
	}
	checks := []struct{ name, got, want string }{
		{"message id", d.MessageID, m.MessageID},
		{"job name", d.JobName, m.JobName},
		{"queue", d.Queue, m.Queue},
		{"idempotency key", d.IdempotencyKey, m.IdempotencyKey},
		{"schema version", d.SchemaVersion, m.SchemaVersion},
		{"content type", d.ContentType, wantCT},
		{"class", string(d.FailureClass), string(m.FailureClass)},
		{"reason", d.Reason, m.Reason},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s %q, want %q", c.name, c.got, c.want)
		}
	}
	if d.Attempts != m.Attempts {
		t.Errorf("attempts %d, want %d", d.Attempts, m.Attempts)
	}
	if len(headers) > 0 && !maps.Equal(d.Headers, headers) {
		t.Errorf("headers %v, want %v", d.Headers, headers)
	}
	if !d.FailedAt.Equal(m.FailedAt) {
		t.Errorf("failed_at %v, want %v", d.FailedAt, m.FailedAt)
	}
	for _, tc := range []struct {
		name      string
		got, want *time.Time
	}{{"enqueued_at", d.EnqueuedAt, m.EnqueuedAt}, {"first_failed_at", d.FirstFailedAt, m.FirstFailedAt}} {
		if (tc.got == nil) != (tc.want == nil) || (tc.got != nil && !tc.got.Equal(*tc.want)) {
			t.Errorf("%s %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestMarshalEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.FixedZone("CET", 3600))
	cases := []struct {
		name        string
		contentType string
		payload     []byte
		wantJSON    bool // written under "payload" (else payload_base64)
	}{
		{"json object with inner white space", "application/json", []byte(`{"a": [1, 2], "b": "é\u00e9"}`), true},
		{"json under a +json type", "application/vnd.api+json; charset=utf-8", []byte(`[1,2]`), true},
		{"json without a content type", "", []byte(`{"x":1}`), true},
		{"json literal null", "application/json", []byte(`null`), true},
		{"json with surrounding white space", "application/json", []byte(" {\"a\":1}\n"), false},
		{"invalid json under a json type", "application/json", []byte(`{"a":`), false},
		{"invalid utf-8", "application/json", []byte("\"\xff\""), false},
		{"empty payload", "application/octet-stream", []byte{}, false},
		{"nul bytes", "application/octet-stream", []byte{0, 0, 1}, false},
		{"xml", "application/xml", []byte(`<a>&amp;</a>`), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			first := at.Add(-time.Hour)
			m := &quarantine.Message{MessageID: "m-1", JobName: "job <&>", Queue: "work", IdempotencyKey: "k\u2028ey",
				SchemaVersion: "2", Attempts: 3, ContentType: c.contentType, EnqueuedAt: &first, FailedAt: at,
				FirstFailedAt: &first, FailureClass: quarantine.ClassRejected, Reason: "bad \x00 input \xfe"}
			headers := map[string]string{"x-quarantine-replay-id": "rb", "X-Upper": "v\t\"q\""}
			env, err := quarantine.MarshalEnvelope(m, c.payload, headers)
			if err != nil {
				t.Fatal(err)
			}
			var top struct {
				Job map[string]json.RawMessage `json:"job"`
			}
			if err := json.Unmarshal(env, &top); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, env)
			}
			if _, isJSON := top.Job["payload"]; isJSON != c.wantJSON {
				t.Errorf("payload as JSON: %t, want %t: %s", isJSON, c.wantJSON, env)
			}
			again, _ := quarantine.MarshalEnvelope(m, c.payload, headers)
			if !bytes.Equal(env, again) {
				t.Errorf("not deterministic:\n%s\n%s", env, again)
			}
			// The reason's invalid bytes come back replaced.
			m.Reason = "bad \x00 input \uFFFD"
			checkRoundTrip(t, m, c.payload, headers, env)
		})
	}
}

func TestMarshalEnvelopeNil(t *testing.T) {
	t.Parallel()
	if _, err := quarantine.MarshalEnvelope(nil, nil, nil); quarantine.ErrorCode(err) != quarantine.EINVALID {
		t.Fatalf("err %v, want EINVALID", err)
	}
}
