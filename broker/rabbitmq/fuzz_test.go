package rabbitmq

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
)

// Shape bits of FuzzDecode: which dead-letter headers the delivery has.
const (
	shapeDeath      = 1 << iota // x-death with one entry
	shapeDeathWrong             // x-death of the wrong type
	shapeFirst                  // x-first-death-queue and -reason
	shapeSparse                 // the entry lacks count and time
	shapeBytes                  // the extra header value is a byte array
	shapeCount                  // x-delivery-count is set
)

// fuzzDelivery builds a delivery from the fuzzer's values.
func fuzzDelivery(body []byte, mid, queue, reason string, count, unix int64, hkey string, hval []byte, shape uint8) amqp.Delivery {
	h := amqp.Table{}
	if shape&shapeDeath != 0 {
		e := amqp.Table{"queue": queue, "reason": reason}
		if shape&shapeSparse == 0 {
			e["count"], e["time"] = count, time.Unix(unix%(1<<40), 0)
		}
		h["x-death"] = []any{e, amqp.Table{"queue": reason}}
	}
	if shape&shapeDeathWrong != 0 {
		h["x-death"] = hval
	}
	if shape&shapeFirst != 0 {
		h["x-first-death-queue"], h["x-first-death-reason"] = queue, reason
	}
	if hkey != "" {
		if shape&shapeBytes != 0 {
			h[hkey] = hval
		} else {
			h[hkey] = string(hval)
		}
	}
	if shape&shapeCount != 0 {
		h["x-delivery-count"] = count
	}
	return amqp.Delivery{Body: body, MessageId: mid, Headers: h}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"order":1}`), "", "orders", "rejected", int64(3), int64(1764400000), "x-idempotency-key", []byte("k"), uint8(shapeDeath|shapeFirst))
	f.Add([]byte(validEnvelope), "m-1", "orders", "expired", int64(1), int64(0), "", []byte{}, uint8(shapeDeath|shapeFirst|shapeCount))
	f.Add([]byte("\xff\x00"), "bad\xff", "q\r\nx", "maxlen", int64(-5), int64(-1), "h\xff", []byte("\xfe"), uint8(shapeDeath|shapeSparse|shapeBytes))
	f.Add([]byte{}, "", "", "", int64(0), int64(0), "", []byte("x"), uint8(shapeDeathWrong))
	f.Add([]byte(`{"envelope":`), "", "", "delivery_limit", int64(1), int64(1), "", []byte{}, uint8(shapeFirst))
	f.Fuzz(func(t *testing.T, body []byte, mid, queue, reason string, count, unix int64, hkey string, hval []byte, shape uint8) {
		d := fuzzDelivery(body, mid, queue, reason, count, unix, hkey, hval, shape)
		in := bytes.Clone(body)
		m := decoder{source: "rmq"}.decode(&d)
		if !bytes.Equal(d.Body, in) {
			t.Fatal("decode changed the body")
		}
		if hkey != "x-delivery-count" {
			// A quorum queue's redelivery count never changes the key.
			d2 := fuzzDelivery(body, mid, queue, reason, count, unix, hkey, hval, shape^shapeCount)
			if k := (decoder{source: "rmq"}).decode(&d2).DedupeKey; k != m.DedupeKey {
				t.Fatalf("x-delivery-count changed the dedupe key: %s vs %s", k, m.DedupeKey)
			}
		}
		for k, v := range d.Headers {
			// The fast JSON rendering of header values is encoding/json's.
			if b, isBytes := v.([]byte); isBytes && utf8.Valid(b) {
				continue // text in a byte array is kept as text
			}
			if want, err := json.Marshal(v); err == nil {
				if _, isString := v.(string); !isString && headerString(v) != string(want) {
					t.Fatalf("header %q: %s, want %s", k, headerString(v), want)
				}
			}
		}
		native := hasNativeHeaders(d.Headers)
		if !isEnvelope(body) && (native || !claimsEnvelope(body)) {
			if !bytes.Equal(m.Payload, body) {
				t.Fatal("payload is not the body")
			}
			if !native && (m.FailureClass != quarantine.ClassUnknown || !m.HasFlag(quarantine.FlagMalformed)) {
				t.Fatalf("raw body: class %s flags %v", m.FailureClass, m.Flags)
			}
		}
		checkMessage(t, &d, m)
	})
}
