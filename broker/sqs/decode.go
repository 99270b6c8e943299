package sqs

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// System attributes the decoder reads.
const (
	attrReceiveCount  = "ApproximateReceiveCount"
	attrFirstReceive  = "ApproximateFirstReceiveTimestamp"
	attrSentTimestamp = "SentTimestamp"
)

// Content types given to native bodies that do not say theirs.
const contentTypeText = "text/plain; charset=utf-8"

// origin is what the decoder knows of the collector.
type origin struct {
	name        string // the collector's name: Message.Source
	sourceQueue string // the queue the jobs were meant for: Message.Queue
	fifo        bool   // the dead-letter queue is a FIFO queue
}

// decode turns one received SQS message into a quarantine message. It
// never fails and never alters the body: the payload is the body's bytes.
//
// A body whose top-level JSON object has an "envelope" member is read by
// collect.DecodeEnvelope (a broken envelope is stored raw and classed
// malformed by it). Any other body is the native form of an SQS
// dead-letter queue: the job's own body, moved there by the queue's
// redrive policy after maxReceiveCount receives, so its class is
// exhausted; native says what its attributes tell of the job. An empty
// body, or one that is not UTF-8 text (which SQS never delivers), is kept
// byte-exact, classed malformed and flagged.
//
// Every message gets Source, SourceKind, Queue (the envelope's job.queue,
// else the configured source queue), MessageID (the job id of an envelope,
// else the SQS MessageId), Attempts, FailedAt, Reason, FailureClass,
// Headers (the message attributes) and ContentType. Its DedupeKey is the
// SQS MessageId, which redeliveries of the same message share.
func decode(o origin, m types.Message, receivedAt time.Time) *quarantine.Message {
	var body []byte
	if m.Body != nil {
		body = []byte(*m.Body)
	} else {
		body = []byte{}
	}
	headers := attributeHeaders(m.MessageAttributes)
	sent := millis(m.Attributes[attrSentTimestamp])

	var msg *quarantine.Message
	if hasEnvelopeKey(body) {
		msg = fromEnvelope(o, body, headers, sent)
	} else {
		msg = native(o, body, headers, m.Attributes, sent, receivedAt)
	}
	msg.Source = o.name
	msg.SourceKind = quarantine.SourceSQS
	id := deref(m.MessageId)
	if msg.MessageID == "" {
		msg.MessageID = id
	}
	if id != "" {
		msg.DedupeKey = id
	} else {
		msg.DedupeKey = "" // the store falls back to the payload's SHA-256
		msg.Reason = joinReason(msg.Reason, "SQS gave no MessageId: deduplicated by payload hash")
	}
	if m.MD5OfBody != nil && !strings.EqualFold(*m.MD5OfBody, md5Hex(body)) {
		msg.Reason = joinReason(msg.Reason, fmt.Sprintf("body MD5 %s differs from the MD5OfBody SQS reported (%s): the body may have been altered in transit",
			md5Hex(body), quarantine.Clip(*m.MD5OfBody)))
	}
	if msg.Flags == nil {
		msg.Flags = []string{}
	}
	return msg
}

// fromEnvelope decodes a failure envelope published on the queue by a
// worker. The envelope's fields win; the queue's attributes fill the gaps.
func fromEnvelope(o origin, body []byte, headers map[string]string, sent *time.Time) *quarantine.Message {
	msg, _ := collect.DecodeEnvelope(body, collect.Origin{Source: o.name, Kind: quarantine.SourceSQS})
	if msg.Queue == "" {
		msg.Queue = o.sourceQueue
	}
	if len(headers) > 0 {
		if msg.Headers == nil {
			msg.Headers = make(map[string]string, len(headers))
		}
		for k, v := range headers {
			if _, ok := msg.Headers[k]; !ok {
				msg.Headers[k] = v
			}
		}
	}
	if msg.FailedAt.IsZero() && sent != nil {
		// The worker sent the envelope when the job failed.
		msg.FailedAt = *sent
	}
	if msg.Reason == "" {
		msg.Reason = "the failure envelope gives no reason"
	}
	return msg
}

// native decodes a body moved to the dead-letter queue by SQS redrive.
//
// SQS moves the message itself, with its system attributes: it keeps
// counting ApproximateReceiveCount, and on a standard queue keeps
// SentTimestamp and ApproximateFirstReceiveTimestamp. The first receive
// from the dead-letter queue therefore reports the source queue's
// receives plus one (2 after maxReceiveCount 1), and:
//
//   - Attempts is that count less this receive, "after N receives";
//   - FirstFailedAt is ApproximateFirstReceiveTimestamp, when the job was
//     first handed to a worker (its first failure came after it, within
//     one visibility timeout);
//   - EnqueuedAt is SentTimestamp on a standard queue; a FIFO queue
//     resets it on the move, so there it is FailedAt, the move itself;
//   - FailedAt on a standard queue is receivedAt: SQS does not report
//     when it moved the message, and a running collector long-polls the
//     dead-letter queue, so it receives a message within moments of the
//     move (a stopped one, later: then this is an upper bound).
//
// A count of 1 is the dead-letter queue's own first receive: the message
// was sent there directly, or moved by an emulator that restarts the
// count and the timestamps (goaws). Then the receives before the move
// are unknown (Attempts 0), SentTimestamp is when the message entered the
// dead-letter queue (FailedAt), and the job's enqueue time is unknown. A
// receive after the first (another consumer of the dead-letter queue, or
// a collector that stopped before its commit) counts one more receive.
func native(o origin, body []byte, headers map[string]string, attrs map[string]string, sent *time.Time, receivedAt time.Time) *quarantine.Message {
	msg := &quarantine.Message{
		Queue:        o.sourceQueue,
		Payload:      body,
		Headers:      headers,
		FailedAt:     receivedAt.UTC(),
		FailureClass: quarantine.ClassExhausted,
		ContentType:  contentType(body, headers),
		Flags:        []string{},
	}
	n, err := receiveCount(attrs[attrReceiveCount])
	moved := err == nil && n >= 2 // the source queue's attributes came along
	switch {
	case err != nil:
		msg.Reason = "moved to DLQ by SQS redrive (" + err.Error() + ")"
	case moved:
		msg.Attempts = n - 1
		msg.Reason = fmt.Sprintf("moved to DLQ by SQS redrive after %d receives", n-1)
	default:
		msg.Reason = fmt.Sprintf("moved to DLQ by SQS redrive (receives unknown: ApproximateReceiveCount %d on the DLQ)", n)
	}
	switch {
	case sent == nil:
	case o.fifo || !moved:
		// The time the message entered the dead-letter queue.
		if !sent.After(msg.FailedAt) {
			msg.FailedAt = *sent
		}
	default:
		msg.EnqueuedAt = sent
	}
	if first := millis(attrs[attrFirstReceive]); moved && first != nil && !first.After(msg.FailedAt) &&
		(msg.EnqueuedAt == nil || !first.Before(*msg.EnqueuedAt)) {
		msg.FirstFailedAt = first
	}
	var problem string
	switch {
	case len(body) == 0:
		problem = "empty message body"
	case !utf8.Valid(body):
		msg.AddFlag(quarantine.FlagInvalidUTF8)
		problem = fmt.Sprintf("body is not valid UTF-8 at offset %d (SQS bodies are text)", collect.InvalidUTF8At(body))
	}
	if problem != "" {
		msg.FailureClass = quarantine.ClassMalformed
		msg.AddFlag(quarantine.FlagMalformed)
		msg.Reason = problem + "; " + msg.Reason
	}
	return msg
}

// hasEnvelopeKey reports whether body is (or starts like) a JSON object
// with a top-level "envelope" member. A body cut short after that member
// still counts: it is a broken envelope, for DecodeEnvelope to flag.
func hasEnvelopeKey(body []byte) bool {
	if !bytes.Contains(body, []byte(`"envelope"`)) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if key == "envelope" {
			return true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// attributeHeaders turns message attributes into headers: String and
// Number values as they are, every other value JSON-encoded (binary as a
// base64 JSON string, lists as JSON arrays).
func attributeHeaders(attrs map[string]types.MessageAttributeValue) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	h := make(map[string]string, len(attrs))
	for name, a := range attrs {
		dt := deref(a.DataType)
		switch {
		case a.StringValue != nil && !strings.HasPrefix(dt, "Binary"):
			h[name] = *a.StringValue
		case a.BinaryValue != nil:
			h[name] = jsonString(a.BinaryValue)
		case len(a.StringListValues) > 0:
			h[name] = jsonString(a.StringListValues)
		case len(a.BinaryListValues) > 0:
			h[name] = jsonString(a.BinaryListValues)
		case a.StringValue != nil:
			h[name] = jsonString(*a.StringValue)
		default:
			h[name] = ""
		}
	}
	return h
}

// contentType takes a content-type attribute when there is a sensible one,
// else guesses from the body.
func contentType(body []byte, headers map[string]string) string {
	for k, v := range headers {
		if strings.EqualFold(k, "content-type") || strings.EqualFold(k, "contentType") || strings.EqualFold(k, "content_type") {
			if v != "" && len(v) <= collect.MaxFieldBytes && utf8.ValidString(v) && !strings.ContainsAny(v, "\r\n\x00") {
				return v
			}
		}
	}
	switch {
	case len(body) > 0 && json.Valid(body):
		return collect.ContentTypeJSON
	case utf8.Valid(body):
		return contentTypeText
	}
	return collect.ContentTypeBinary
}

// receiveCount parses ApproximateReceiveCount.
func receiveCount(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("receive count not reported")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unreadable receive count %q", quarantine.Clip(s))
	}
	return n, nil
}

// millis parses an SQS timestamp (milliseconds since the epoch); nil when
// absent or unreadable.
func millis(s string) *time.Time {
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	t := time.UnixMilli(n).UTC()
	return &t
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
