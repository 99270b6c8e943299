package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// Headers of the dead-letter formats the decoder recognises.
const (
	// Kafka Connect errant records (errors.deadletterqueue.context.headers.enable).
	connectPrefix        = "__connect.errors."
	connectTopic         = connectPrefix + "topic"
	connectPartition     = connectPrefix + "partition"
	connectOffset        = connectPrefix + "offset"
	connectConnector     = connectPrefix + "connector.name"
	connectTask          = connectPrefix + "task.id"
	connectStage         = connectPrefix + "stage"
	connectClass         = connectPrefix + "class.name"
	connectExceptionName = connectPrefix + "exception.class.name"
	connectExceptionMsg  = connectPrefix + "exception.message"
	connectStacktrace    = connectPrefix + "exception.stacktrace"

	// Spring Kafka's DeadLetterPublishingRecoverer (KafkaHeaders.DLT_*):
	// partition a 4-byte and offset and timestamp 8-byte big-endian
	// integers, the others UTF-8.
	springPrefix        = "kafka_dlt-"
	springTopic         = springPrefix + "original-topic"
	springPartition     = springPrefix + "original-partition"
	springOffset        = springPrefix + "original-offset"
	springTimestamp     = springPrefix + "original-timestamp"
	springGroup         = springPrefix + "original-consumer-group"
	springFQCN          = springPrefix + "exception-fqcn"
	springCauseFQCN     = springPrefix + "exception-cause-fqcn"
	springMessage       = springPrefix + "exception-message"
	springStacktrace    = springPrefix + "exception-stacktrace"
	springKeyMessage    = springPrefix + "key-exception-message"
	springKeyFQCN       = springPrefix + "key-exception-fqcn"
	springKeyStacktrace = springPrefix + "key-exception-stacktrace"
	// springRetryPrefix starts the headers of Spring's retry topics;
	// springAttempts is its attempt count (4-byte int).
	springRetryPrefix = "retry_topic-"
	springAttempts    = springRetryPrefix + "attempts"

	// Kafka Streams dead letters (KIP-1034, errors.dead.letter.queue.topic.name).
	streamsPrefix     = "__streams.errors."
	streamsException  = streamsPrefix + "exception" // the exception's toString: "class: message"
	streamsMessage    = streamsPrefix + "message"
	streamsStacktrace = streamsPrefix + "stacktrace"
	streamsTopic      = streamsPrefix + "topic"
	streamsPartition  = streamsPrefix + "partition"
	streamsOffset     = streamsPrefix + "offset"
)

// Headers the collector adds to describe the dead-letter record itself;
// the replay publisher reads the key back from them and sends none of
// them.
const (
	HeaderKey       = "x-kafka-key"        // the record key, when it is UTF-8 text
	HeaderKeyBase64 = "x-kafka-key-base64" // the record key, base64 (std), when it is not
	HeaderTopic     = "x-kafka-topic"      // the dead-letter topic, partition and offset it was collected from
	HeaderPartition = "x-kafka-partition"
	HeaderOffset    = "x-kafka-offset"
	HeaderTimestamp = "x-kafka-timestamp" // the dead-letter record's timestamp, RFC 3339 (ms)
)

// maxStacktrace clips a stack trace kept in the headers.
const maxStacktrace = 8 << 10

// DedupeKey is the dedupe key of the record at offset of topic's
// partition, produced at ts: the coordinates identify it, and the
// timestamp tells apart the records of a topic deleted and made anew (its
// offsets start over).
func DedupeKey(topic string, partition int32, offset int64, ts time.Time) string {
	if ts.IsZero() {
		return fmt.Sprintf("%s/%d/%d", topic, partition, offset)
	}
	return fmt.Sprintf("%s/%d/%d:%d", topic, partition, offset, ts.UnixMilli())
}

// decoder turns records of one collector into quarantine messages.
type decoder struct {
	source      string // the collector's name
	sourceTopic string // the queue of a record that names none
}

// header is one record header as the decoder reads it.
type headers []kgo.RecordHeader

func (h headers) get(name string) ([]byte, bool) {
	for i := len(h) - 1; i >= 0; i-- { // the last one wins, as Kafka's lastHeader
		if h[i].Key == name {
			return h[i].Value, true
		}
	}
	return nil, false
}

func (h headers) text(name string) string {
	v, _ := h.get(name)
	return string(v)
}

func (h headers) hasPrefix(p string) bool {
	for _, x := range h {
		if strings.HasPrefix(x.Key, p) {
			return true
		}
	}
	return false
}

// format is the dead-letter format a record is in.
type format int

const (
	formatRaw format = iota
	formatEnvelope
	formatConnect
	formatSpring
	formatStreams
)

func detect(r *kgo.Record) format {
	h := headers(r.Headers)
	native := formatRaw
	switch {
	case h.hasPrefix(connectPrefix):
		native = formatConnect
	case h.hasPrefix(springPrefix):
		native = formatSpring
	case h.hasPrefix(streamsPrefix):
		native = formatStreams
	}
	switch {
	case native == formatRaw && claimsEnvelope(r.Value), native != formatRaw && claimsEnvelope(r.Value) && collect.IsEnvelope(r.Value):
		return formatEnvelope
	}
	return native
}

// decode turns one record of a dead-letter topic into a message. It never
// fails: whatever the value and headers hold, the value is kept
// byte-exact, and what was wrong is flagged and said in the reason.
func (dc decoder) decode(r *kgo.Record) *quarantine.Message {
	var m *quarantine.Message
	switch detect(r) {
	case formatEnvelope:
		m, _ = collect.DecodeEnvelope(r.Value, collect.Origin{Source: dc.source, Kind: quarantine.SourceKafka})
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		if m.FailedAt.IsZero() {
			m.FailedAt = r.Timestamp
		}
	case formatConnect:
		m = dc.connect(r)
	case formatSpring:
		m = dc.spring(r)
	case formatStreams:
		m = dc.streams(r)
	default:
		m = collect.Unrecognised(dc.base(r), "a Kafka Connect, Spring Kafka or Kafka Streams dead letter")
	}
	if m.Queue == "" {
		m.Queue = dc.sourceTopic
	}
	if m.MessageID == "" {
		m.MessageID = coordinates(r.Topic, r.Partition, r.Offset)
	}
	addRecordHeaders(m.Headers, r)
	m.DedupeKey = DedupeKey(r.Topic, r.Partition, r.Offset, r.Timestamp)
	if m.Flags == nil {
		m.Flags = []string{}
	}
	return m
}

// addRecordHeaders records where the dead letter was and its key.
func addRecordHeaders(h map[string]string, r *kgo.Record) {
	if r.Key != nil {
		if utf8.Valid(r.Key) {
			h[HeaderKey] = string(r.Key)
		} else {
			h[HeaderKeyBase64] = base64.StdEncoding.EncodeToString(r.Key)
		}
	}
	h[HeaderTopic] = r.Topic
	h[HeaderPartition] = strconv.FormatInt(int64(r.Partition), 10)
	h[HeaderOffset] = strconv.FormatInt(r.Offset, 10)
	if !r.Timestamp.IsZero() {
		h[HeaderTimestamp] = r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
}

// base is what every non-envelope record gives: the value byte-exact,
// the headers, the record timestamp as the enqueue time.
func (dc decoder) base(r *kgo.Record) *quarantine.Message {
	m := collect.Raw(dc.source, quarantine.SourceKafka, r.Value, dc.headerMap(r.Headers))
	for _, x := range r.Headers {
		if !utf8.Valid(x.Value) && !binaryHeader(x.Key) || !utf8.ValidString(x.Key) {
			m.AddFlag(quarantine.FlagInvalidUTF8)
		}
	}
	return m
}

// headerMap renders the record headers as text: UTF-8 values as they are
// (stack traces clipped), Spring's binary integers in decimal, other
// bytes as they are (the store replaces what is not UTF-8, flagged). A
// name sent several times keeps its values as a JSON array.
func (dc decoder) headerMap(hs []kgo.RecordHeader) map[string]string {
	out := make(map[string]string, len(hs)+6)
	multi := map[string][]string{}
	for _, x := range hs {
		v := headerString(x.Key, x.Value)
		if _, dup := out[x.Key]; dup {
			if multi[x.Key] == nil {
				multi[x.Key] = []string{out[x.Key]}
			}
			multi[x.Key] = append(multi[x.Key], v)
			continue
		}
		out[x.Key] = v
	}
	for k, vs := range multi {
		b, _ := json.Marshal(vs)
		out[k] = string(b)
	}
	return out
}

func headerString(name string, v []byte) string {
	if binaryHeader(name) {
		if n, ok := bigEndian(v); ok {
			return strconv.FormatInt(n, 10)
		}
	}
	s := string(v)
	if strings.HasSuffix(name, "stacktrace") && len(s) > maxStacktrace {
		s = truncate(s, maxStacktrace) + "…"
	}
	return s
}

// binaryHeader names the Spring headers that carry big-endian integers.
func binaryHeader(name string) bool {
	switch name {
	case springPartition, springOffset, springTimestamp, springAttempts,
		"retry_topic-backoff-timestamp", "retry_topic-original-timestamp":
		return true
	}
	return false
}

// bigEndian reads a 4- or 8-byte big-endian integer.
func bigEndian(b []byte) (int64, bool) {
	switch len(b) {
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))), true
	case 8:
		return int64(binary.BigEndian.Uint64(b)), true
	}
	return 0, false
}

// origin is where the failed record was, as a dead-letter format says.
type origin struct {
	topic     string
	partition int64
	offset    int64
	hasCoords bool
	problems  []string
}

func (o *origin) read(h headers, topic, partition, offset string, binary bool) {
	o.topic = h.text(topic)
	if o.topic == "" {
		o.problems = append(o.problems, topic+" is missing")
	}
	p, okp := o.number(h, partition, binary)
	f, oko := o.number(h, offset, binary)
	o.partition, o.offset, o.hasCoords = p, f, okp && oko
}

func (o *origin) number(h headers, name string, binary bool) (int64, bool) {
	v, ok := h.get(name)
	if !ok {
		o.problems = append(o.problems, name+" is missing")
		return 0, false
	}
	if binary {
		n, ok := bigEndian(v)
		if !ok {
			o.problems = append(o.problems, fmt.Sprintf("%s must be a 4- or 8-byte big-endian integer, got %d bytes", name, len(v)))
		}
		return n, ok
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	if err != nil {
		o.problems = append(o.problems, fmt.Sprintf("%s must be an integer, got %q", name, quarantine.Clip(string(v))))
		return 0, false
	}
	return n, true
}

// fromOrigin fills m from the coordinates of the original record that the
// headers topic, partition and offset give (binary: as big-endian
// integers): queue, message id, and what is wrong with them.
func fromOrigin(m *quarantine.Message, h headers, topic, partition, offset string, binary bool) *quarantine.Message {
	var o origin
	o.read(h, topic, partition, offset, binary)
	o.apply(m)
	return m
}

// enqueuedAt takes ts, a record's timestamp when it has one, as the time
// m was enqueued.
func enqueuedAt(m *quarantine.Message, ts time.Time) {
	if !ts.IsZero() {
		t := ts.UTC()
		m.EnqueuedAt = &t
	}
}

// apply fills m from o: queue, message id, and the problems.
func (o *origin) apply(m *quarantine.Message) {
	m.Queue = o.topic
	if o.topic != "" && o.hasCoords {
		m.MessageID = coordinates(o.topic, int32(o.partition), o.offset)
	}
	if len(o.problems) > 0 {
		m.AddFlag(quarantine.FlagMalformed)
		m.Reason += "; malformed dead-letter headers: " + strings.Join(o.problems, "; ")
	}
}

// connect decodes a Kafka Connect errant record. Its timestamp is the
// original record's; when it failed is not said.
func (dc decoder) connect(r *kgo.Record) *quarantine.Message {
	h := headers(r.Headers)
	m := dc.base(r)
	stage := h.text(connectStage)
	m.FailureClass = quarantine.ClassPermanent
	if strings.HasSuffix(stage, "_CONVERTER") {
		m.FailureClass = quarantine.ClassMalformed // the record could not be deserialised
	}
	var b strings.Builder
	b.WriteString("Kafka Connect: ")
	b.WriteString(exception(h.text(connectExceptionName), h.text(connectExceptionMsg)))
	var ctx []string
	if v := h.text(connectConnector); v != "" {
		ctx = append(ctx, "connector "+v)
	}
	if v := h.text(connectTask); v != "" {
		ctx = append(ctx, "task "+v)
	}
	if stage != "" {
		ctx = append(ctx, "stage "+stage)
	}
	if v := h.text(connectClass); v != "" {
		ctx = append(ctx, v)
	}
	if len(ctx) > 0 {
		b.WriteString(" (" + strings.Join(ctx, ", ") + ")")
	}
	m.Reason = b.String()
	enqueuedAt(m, r.Timestamp)
	return fromOrigin(m, h, connectTopic, connectPartition, connectOffset, false)
}

// spring decodes a record Spring Kafka's DeadLetterPublishingRecoverer
// published: its timestamp is when it was dead-lettered, the original
// timestamp a header.
func (dc decoder) spring(r *kgo.Record) *quarantine.Message {
	h := headers(r.Headers)
	m := dc.base(r)
	fqcn, msg := h.text(springFQCN), h.text(springMessage)
	cause := h.text(springCauseFQCN)
	if fqcn == "" && msg == "" { // a key deserialisation failure
		fqcn, msg = h.text(springKeyFQCN), h.text(springKeyMessage)
	}
	m.FailureClass = quarantine.ClassExhausted // the default error handler retries before it recovers
	if conversion(fqcn) || conversion(cause) {
		m.FailureClass = quarantine.ClassMalformed
	}
	m.Reason = "Spring Kafka: " + exception(fqcn, msg)
	if cause != "" && cause != fqcn {
		m.Reason += " (cause " + cause + ")"
	}
	if v, ok := h.get(springAttempts); ok {
		if n, ok := bigEndian(v); ok && n > 0 && n < 1<<31 {
			m.Attempts = int(n)
		}
	}
	m.FailedAt = r.Timestamp
	if v, ok := h.get(springTimestamp); ok {
		if n, ok := bigEndian(v); ok && n > 0 {
			t := time.UnixMilli(n).UTC()
			m.EnqueuedAt = &t
		}
	}
	return fromOrigin(m, h, springTopic, springPartition, springOffset, true)
}

// streams decodes a Kafka Streams dead letter (KIP-1034). Its timestamp
// is the original record's.
func (dc decoder) streams(r *kgo.Record) *quarantine.Message {
	h := headers(r.Headers)
	m := dc.base(r)
	exc, msg := h.text(streamsException), h.text(streamsMessage)
	m.FailureClass = quarantine.ClassPermanent // Streams does not retry
	if conversion(exc) {
		m.FailureClass = quarantine.ClassMalformed
	}
	switch {
	case exc != "":
		m.Reason = "Kafka Streams: " + exc // "class: message" already
	default:
		m.Reason = "Kafka Streams: " + exception("", msg)
	}
	enqueuedAt(m, r.Timestamp)
	return fromOrigin(m, h, streamsTopic, streamsPartition, streamsOffset, false)
}

// exception writes "class: message", with what is missing said.
func exception(class, msg string) string {
	switch {
	case class == "" && msg == "":
		return "the dead letter gives no exception"
	case msg == "":
		return class + " (no exception message)"
	case class == "":
		return msg
	}
	return class + ": " + msg
}

// conversion reports whether an exception class says the record could
// not be deserialised or converted.
func conversion(class string) bool {
	for _, s := range []string{"Deserializ", "SerializationException", "ConversionException", "MessageConversion", "DataException"} {
		if strings.Contains(class, s) {
			return true
		}
	}
	return false
}

// coordinates names a record: topic/partition/offset.
func coordinates(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}

// claimsEnvelope is the cheap test: an object that mentions "envelope".
func claimsEnvelope(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(`"envelope"`))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
