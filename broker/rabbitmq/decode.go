package rabbitmq

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// decoder turns deliveries of one collector into quarantine messages.
type decoder struct {
	source      string // the collector's name
	sourceQueue string // overrides the original queue when set
}

// decode turns one delivery into a message. It never fails: whatever the
// body and headers hold, the body is kept byte-exact and what was wrong is
// flagged and said in the reason.
func (dc decoder) decode(d *amqp.Delivery) *quarantine.Message {
	native := hasNativeHeaders(d.Headers)
	var m *quarantine.Message
	var dl deadLetter
	if native {
		dl = parseDeadLetter(d.Headers)
	}
	switch {
	case !native && claimsEnvelope(d.Body), native && isEnvelope(d.Body):
		m = dc.fromEnvelope(d, dl)
	case native:
		m = dc.fromDeadLetter(d, dl)
	default:
		m = dc.raw(d)
	}
	if dc.sourceQueue != "" {
		m.Queue = dc.sourceQueue
	}
	if m.MessageID == "" {
		m.MessageID = d.MessageId
	}
	if m.EnqueuedAt == nil && !d.Timestamp.IsZero() {
		t := d.Timestamp.UTC()
		m.EnqueuedAt = &t
	}
	m.DedupeKey = dedupeKey(d, dl)
	if m.Flags == nil {
		m.Flags = []string{}
	}
	return m
}

// fromEnvelope decodes a canonical failure envelope. Its job headers are
// the message's headers (they go back with a replay); the transport's
// dead-letter headers only fill a missing queue.
func (dc decoder) fromEnvelope(d *amqp.Delivery, dl deadLetter) *quarantine.Message {
	m, _ := collect.DecodeEnvelope(d.Body, collect.Origin{Source: dc.source, Kind: quarantine.SourceRabbitMQ})
	if m.Queue == "" {
		m.Queue = dl.queue()
	}
	return m
}

// fromDeadLetter decodes a message that RabbitMQ dead-lettered.
func (dc decoder) fromDeadLetter(d *amqp.Delivery, dl deadLetter) *quarantine.Message {
	m := dc.base(d)
	m.Queue = dl.queue()
	m.FailureClass = dl.class()
	m.Reason = dl.reason()
	if len(dl.deaths) > 0 {
		m.Attempts = clampInt(dl.deaths[0].count)
		m.FailedAt = dl.deaths[0].time
		// The earliest death of any entry: when the job first failed (a
		// message that went through a retry queue has several entries).
		var first time.Time
		for _, d := range dl.deaths {
			if d.hasTime && (first.IsZero() || d.time.Before(first)) {
				first = d.time
			}
		}
		if !first.IsZero() {
			m.FirstFailedAt = &first
		}
	}
	if len(dl.problems) > 0 {
		m.AddFlag(quarantine.FlagMalformed)
	}
	return m
}

// raw keeps a message that is neither an envelope nor a dead letter.
func (dc decoder) raw(d *amqp.Delivery) *quarantine.Message {
	return collect.Unrecognised(dc.base(d), "a RabbitMQ dead letter (no x-death header)")
}

// base is the message every non-envelope body gives: the body byte-exact,
// the properties and the headers.
func (dc decoder) base(d *amqp.Delivery) *quarantine.Message {
	m := &quarantine.Message{
		Source:      dc.source,
		SourceKind:  quarantine.SourceRabbitMQ,
		Payload:     d.Body,
		ContentType: d.ContentType,
		JobName:     d.Type,
		MessageID:   d.MessageId,
	}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	if m.ContentType == "" {
		m.ContentType = collect.ContentTypeBinary
		if len(d.Body) > 0 && json.Valid(d.Body) {
			m.ContentType = collect.ContentTypeJSON
		}
	}
	var clean bool
	m.Headers, clean = stringHeaders(d.Headers)
	if !clean {
		m.AddFlag(quarantine.FlagInvalidUTF8)
	}
	return m
}

// isEnvelope reports whether body is a JSON object with a non-null
// "envelope" member: it claims to be a failure envelope. Only a dead
// letter's body needs the test (without x-death headers claimsEnvelope
// decides), and it reads the body once.
func isEnvelope(body []byte) bool {
	return claimsEnvelope(body) && collect.IsEnvelope(body)
}

// claimsEnvelope is the cheap test: an object that mentions "envelope".
// A body that passes it but is not valid JSON is decoded as an envelope
// when there are no dead-letter headers, so that the reason says where the
// JSON broke.
func claimsEnvelope(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(`"envelope"`))
}

func textOK(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func clampInt(n int64) int {
	const maxInt32 = 1<<31 - 1
	switch {
	case n < 0:
		return 0
	case n > maxInt32:
		return maxInt32
	}
	return int(n)
}
