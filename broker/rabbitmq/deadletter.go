package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
)

// The headers RabbitMQ adds when it dead-letters a message.
const (
	headerDeath            = "x-death"
	headerFirstDeathQueue  = "x-first-death-queue"
	headerFirstDeathReason = "x-first-death-reason"
	headerFirstDeathExch   = "x-first-death-exchange"
	// headerDeliveryCount is set by quorum queues on redelivery; it changes
	// each time, so it is left out of the content hash.
	headerDeliveryCount = "x-delivery-count"
)

// The x-death reasons RabbitMQ writes.
const (
	reasonRejected      = "rejected"
	reasonExpired       = "expired"
	reasonMaxLen        = "maxlen"
	reasonDeliveryLimit = "delivery_limit"
)

// death is one entry of x-death: the message was dead-lettered count times
// from queue for reason, most recently (or first: RabbitMQ keeps the time
// of the entry's first death) at time.
type death struct {
	queue, reason, exchange string
	count                   int64
	time                    time.Time
	hasCount, hasTime       bool
}

// deadLetter is what the dead-letter headers say. deaths is newest first,
// as RabbitMQ orders x-death. problems lists what was missing or ill-typed.
type deadLetter struct {
	deaths      []death
	firstQueue  string
	firstReason string
	problems    []string
}

// hasNativeHeaders reports whether RabbitMQ dead-lettered the message.
func hasNativeHeaders(t amqp.Table) bool {
	for _, k := range []string{headerDeath, headerFirstDeathQueue, headerFirstDeathReason} {
		if _, ok := t[k]; ok {
			return true
		}
	}
	return false
}

// parseDeadLetter reads x-death, x-first-death-queue and
// x-first-death-reason, tolerating any shape.
func parseDeadLetter(t amqp.Table) deadLetter {
	var dl deadLetter
	dl.firstQueue = dl.text(t, headerFirstDeathQueue, headerFirstDeathQueue)
	dl.firstReason = dl.text(t, headerFirstDeathReason, headerFirstDeathReason)
	v, ok := t[headerDeath]
	if !ok {
		dl.problems = append(dl.problems, "x-death is missing")
		return dl
	}
	list, ok := v.([]any)
	if !ok {
		dl.problems = append(dl.problems, "x-death must be an array, got "+typeName(v))
		return dl
	}
	if len(list) == 0 {
		dl.problems = append(dl.problems, "x-death is empty")
	}
	for i, e := range list {
		tab, ok := e.(amqp.Table)
		if !ok {
			dl.problems = append(dl.problems, fmt.Sprintf("x-death[%d] must be a table, got %s", i, typeName(e)))
			continue
		}
		dl.deaths = append(dl.deaths, dl.entry(i, tab))
	}
	return dl
}

// entry reads one x-death table. Only the newest entry's missing fields are
// problems: older ones are history.
func (dl *deadLetter) entry(i int, t amqp.Table) death {
	name := fmt.Sprintf("x-death[%d].", i)
	var d death
	strict := i == 0
	req := func(key string) string {
		if !strict {
			if _, ok := t[key]; !ok {
				return ""
			}
		}
		return dl.text(t, key, name+key)
	}
	d.queue = req("queue")
	d.reason = req("reason")
	d.exchange, _ = t["exchange"].(string)
	if v, ok := t["count"]; ok {
		if d.count, d.hasCount = integer(v); !d.hasCount || d.count < 0 {
			d.hasCount = false
			dl.problems = append(dl.problems, name+"count must be a non-negative integer, got "+typeName(v))
		}
	} else if strict {
		dl.problems = append(dl.problems, name+"count is missing")
	}
	switch v := t["time"].(type) {
	case time.Time:
		d.time, d.hasTime = v.UTC(), !v.IsZero()
	case nil:
		if strict {
			dl.problems = append(dl.problems, name+"time is missing")
		}
	default:
		dl.problems = append(dl.problems, name+"time must be a timestamp, got "+typeName(v))
	}
	return d
}

// text reads a string field (an AMQP long string may arrive as bytes); a
// missing or ill-typed one is a problem.
func (dl *deadLetter) text(t amqp.Table, key, name string) string {
	switch v := t[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		if _, ok := t[key]; !ok {
			dl.problems = append(dl.problems, name+" is missing")
			return ""
		}
	}
	dl.problems = append(dl.problems, name+" must be a string, got "+typeName(t[key]))
	return ""
}

// queue is the queue the job was meant for: where it first died.
func (dl deadLetter) queue() string {
	if dl.firstQueue != "" {
		return dl.firstQueue
	}
	for _, d := range dl.deaths {
		if d.queue != "" {
			return d.queue
		}
	}
	return ""
}

// newestReason is the reason of the latest dead-lettering.
func (dl deadLetter) newestReason() string {
	if len(dl.deaths) > 0 && dl.deaths[0].reason != "" {
		return dl.deaths[0].reason
	}
	return dl.firstReason
}

// class maps the latest reason to a failure class. maxlen is overflow: the
// queue's x-max-length or x-max-length-bytes dropped the message (the
// oldest with overflow drop-head, the newest with reject-publish-dlx)
// whatever it held, and no consumer refused it.
func (dl deadLetter) class() quarantine.FailureClass {
	switch dl.newestReason() {
	case reasonRejected:
		return quarantine.ClassRejected
	case reasonExpired:
		return quarantine.ClassExpired
	case reasonDeliveryLimit:
		return quarantine.ClassDeliveryLimit
	case reasonMaxLen:
		return quarantine.ClassOverflow
	}
	return quarantine.ClassUnknown
}

// reason says, compactly, why and where the message died, then what was
// wrong with the headers.
func (dl deadLetter) reason() string {
	var b strings.Builder
	r := dl.newestReason()
	q := ""
	if len(dl.deaths) > 0 {
		q = dl.deaths[0].queue
	}
	if q == "" {
		q = dl.queue()
	}
	switch r {
	case "":
		b.WriteString("dead-lettered for an unknown reason")
	case reasonRejected, reasonExpired, reasonMaxLen, reasonDeliveryLimit:
		b.WriteString(r)
	default:
		b.WriteString("dead-lettered for an unknown reason " + quote(r))
	}
	if q != "" {
		b.WriteString(" from queue " + word(q))
	}
	if len(dl.deaths) > 0 && dl.deaths[0].hasCount {
		b.WriteString(" (x-death count " + strconv.FormatInt(dl.deaths[0].count, 10) + ")")
	}
	if len(dl.problems) > 0 {
		b.WriteString("; malformed dead-letter headers: " + strings.Join(dl.problems, "; "))
	}
	return b.String()
}

// integer accepts any AMQP integer type.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case int:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= 1<<63-1 {
			return int64(x), true
		}
	}
	return 0, false
}

// typeName names an AMQP field value's type for a reason.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case string, []byte:
		return "a string"
	case amqp.Table:
		return "a table"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case time.Time:
		return "a timestamp"
	case float32, float64, amqp.Decimal:
		return "a number"
	}
	if _, ok := integer(v); ok {
		return "an integer"
	}
	return fmt.Sprintf("%T", v)
}

// word writes a broker name as is when it is plain, quoted otherwise, and
// never longer than 255 bytes.
func word(s string) string {
	plain := s != "" && len(s) <= maxNameBytes && utf8.ValidString(s)
	for _, r := range s {
		if !plain || unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return quote(s)
}

func quote(s string) string {
	if len(s) > maxNameBytes {
		n := maxNameBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return strconv.Quote(s)
}
