package nats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// streamMsg is one message as stored in a stream: what the decoders read.
type streamMsg struct {
	Stream  string
	Seq     uint64
	Time    time.Time // when the stream stored it
	Subject string
	Header  nats.Header
	Data    []byte
}

// DedupeKey is the dedupe key of the message stored in stream at seq at
// time stored: stream and sequence identify it, and the store time tells
// apart the messages of a stream that was deleted and made anew (its
// sequences start over).
func DedupeKey(stream string, seq uint64, stored time.Time) string {
	if stored.IsZero() {
		return fmt.Sprintf("%s:%d", stream, seq)
	}
	return fmt.Sprintf("%s:%d:%d", stream, seq, stored.UnixNano())
}

// decodeFailure turns a message of a failure stream (mode a) into a
// quarantine message: a canonical envelope is decoded by
// collect.DecodeEnvelope; anything else is kept raw, byte-exact, classed
// malformed and flagged, with a reason that says what was wrong.
func decodeFailure(collector string, in streamMsg) *quarantine.Message {
	m, _ := collect.DecodeEnvelope(in.Data, collect.Origin{Source: collector, Kind: quarantine.SourceNATS})
	if in.Seq > 0 {
		m.DedupeKey = DedupeKey(in.Stream, in.Seq, in.Time)
	} // else: no stream metadata; the store keys it by the payload's hash
	if m.HasFlag(quarantine.FlagMalformed) {
		// Not an envelope: the transport headers are all we know.
		m.Headers = headerMap(in.Header)
		if ct := headerValue(in.Header, "Content-Type"); ct != "" {
			m.ContentType = ct
		}
	}
	if m.Queue == "" {
		m.Queue = in.Subject
	}
	if m.MessageID == "" {
		m.MessageID = messageID(in)
	}
	if m.FailedAt.IsZero() {
		m.FailedAt = in.Time
	}
	return m
}

// gaveUp says why mode (b) collects a message: its consumer gave up on it.
type gaveUp struct {
	Consumer   string
	Deliveries int
	FailedAt   time.Time // zero when unknown (found by reconciliation)
	Reason     string
}

// decodeOriginal turns a message that a worker consumer gave up on (mode
// b) into a quarantine message. The message is the job itself, published
// by the application: its bytes are the payload, byte-exact, and its
// headers are the job's headers; the original subject is the queue a
// replay goes back to.
func decodeOriginal(collector string, in streamMsg, g gaveUp) *quarantine.Message {
	m := &quarantine.Message{
		Source:       collector,
		SourceKind:   quarantine.SourceNATS,
		Queue:        in.Subject,
		MessageID:    messageID(in),
		Attempts:     g.Deliveries,
		FailureClass: quarantine.ClassDeliveryLimit,
		Reason:       g.Reason,
		Payload:      cloneBytes(in.Data),
		ContentType:  contentType(in),
		Headers:      headerMap(in.Header),
		FailedAt:     g.FailedAt,
		DedupeKey:    DedupeKey(in.Stream, in.Seq, in.Time),
		Flags:        []string{},
	}
	if !in.Time.IsZero() {
		t := in.Time
		m.EnqueuedAt = &t
	}
	return m
}

// AdvisoryMaxDeliver is the type of a MaxDeliver advisory.
const AdvisoryMaxDeliver = "io.nats.jetstream.advisory.v1.max_deliver"

// advisory is a MaxDeliver advisory, as the server publishes it on
// $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>.
type advisory struct {
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	Timestamp  time.Time `json:"timestamp"`
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
}

// parseAdvisory decodes a MaxDeliver advisory about stream and consumer.
// An error says what is wrong with it.
func parseAdvisory(data []byte, stream, consumer string) (advisory, error) {
	var a advisory
	if len(data) == 0 {
		return a, errors.New("the advisory is empty")
	}
	if !utf8.Valid(data) {
		return a, errors.New("the advisory is not valid UTF-8")
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("the advisory is not valid JSON: %v", err)
	}
	switch {
	case a.Type != AdvisoryMaxDeliver:
		return a, fmt.Errorf("type is %q, not %s", quarantine.Clip(a.Type), AdvisoryMaxDeliver)
	case a.Stream != stream:
		return a, fmt.Errorf("stream is %q, not %q", quarantine.Clip(a.Stream), stream)
	case a.Consumer != consumer:
		return a, fmt.Errorf("consumer is %q, not %q", quarantine.Clip(a.Consumer), consumer)
	case a.StreamSeq == 0:
		return a, errors.New("stream_seq is missing")
	}
	return a, nil
}

// deliveries returns a's delivery count as an int.
func (a advisory) deliveries() int {
	return int(min(a.Deliveries, math.MaxInt32))
}

// maxDeliverReason is the reason of a message collected from its advisory.
func maxDeliverReason(stream, consumer string, deliveries int) string {
	return fmt.Sprintf("JetStream consumer %q of stream %q gave up after %d deliveries (MaxDeliver reached)",
		consumer, stream, deliveries)
}

// reconciledReason is the reason of a message found by reconciliation.
func reconciledReason(stream, consumer string, maxDeliver int) string {
	return fmt.Sprintf("JetStream consumer %q of stream %q gave up on this message (MaxDeliver %d, or terminated): "+
		"found by reconciliation below the consumer's ack floor, never acknowledged; its advisory was missed",
		consumer, stream, maxDeliver)
}

// decodeBadAdvisory keeps a message of the capture stream that is not a
// valid advisory: raw, byte-exact, classed malformed and flagged.
func decodeBadAdvisory(collector string, in streamMsg, problem error) *quarantine.Message {
	m := &quarantine.Message{
		Source:       collector,
		SourceKind:   quarantine.SourceNATS,
		Queue:        in.Subject,
		MessageID:    messageID(in),
		FailureClass: quarantine.ClassMalformed,
		Reason:       "not a MaxDeliver advisory: " + problem.Error(),
		Payload:      cloneBytes(in.Data),
		ContentType:  collect.SniffContentType(in.Data),
		Headers:      headerMap(in.Header),
		FailedAt:     in.Time,
		DedupeKey:    DedupeKey(in.Stream, in.Seq, in.Time),
		Flags:        []string{quarantine.FlagMalformed},
	}
	if !utf8.Valid(in.Data) {
		m.AddFlag(quarantine.FlagInvalidUTF8)
	}
	return m
}

// headerMap turns NATS headers into strings: one value as is, several as
// a JSON array. Nil for no headers.
func headerMap(h nats.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, vs := range h {
		switch len(vs) {
		case 0:
			out[k] = ""
		case 1:
			out[k] = vs[0]
		default:
			b, _ := json.Marshal(vs)
			out[k] = string(b)
		}
	}
	return out
}

// headerValue returns the first value of the header name, matched without
// regard to case.
func headerValue(h nats.Header, name string) string {
	if vs := h.Values(name); len(vs) > 0 {
		return vs[0]
	}
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// messageID is the publisher's Nats-Msg-Id, or stream:seq.
func messageID(in streamMsg) string {
	if id := headerValue(in.Header, nats.MsgIdHdr); id != "" {
		return id
	}
	return fmt.Sprintf("%s:%d", in.Stream, in.Seq)
}

// contentType is the Content-Type header, or a guess from the bytes.
func contentType(in streamMsg) string {
	if ct := headerValue(in.Header, "Content-Type"); ct != "" {
		return ct
	}
	return collect.SniffContentType(in.Data)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return bytes.Clone(b)
}
