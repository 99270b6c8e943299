package replay

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/quarantine-dev/quarantine"
)

// RedactedValue is what ingest stores in place of a redacted header's
// value (collect.RedactedValue): such a header is never sent.
const RedactedValue = "<redacted>"

// bookkeeping names headers (lowercase; a name ending in "-" or "." is a
// prefix) that brokers add when they dead-letter or deliver a message; a
// replay does not copy them, whatever broker it goes to, and it sets its
// own x-quarantine-* headers afresh. A broker package adds the names of
// its own dead-letter formats with RegisterBookkeeping.
var bookkeeping = []string{"x-death", "x-first-death-", "x-last-death-", "x-quarantine-",
	"nats-", "x-delivery-count", "x-received-from"}

// registered holds the names given to RegisterBookkeeping.
var registered atomic.Pointer[[]string]

// RegisterBookkeeping adds header names (matched without regard to case;
// a name ending in "-" or "." is a prefix) that a broker or its
// frameworks add when they dead-letter a message, so that no replay
// copies them, whatever broker it goes to. A broker package calls it from
// an init function, so that a program importing the package (the
// quarantine binary imports every broker) drops them. Safe for concurrent
// use.
func RegisterBookkeeping(names ...string) {
	for {
		old := registered.Load()
		var next []string
		if old != nil {
			next = append(next, *old...)
		}
		for _, n := range names {
			next = append(next, strings.ToLower(n))
		}
		if registered.CompareAndSwap(old, &next) {
			return
		}
	}
}

func isBookkeeping(name string) bool {
	l := strings.ToLower(name)
	if matchesAny(l, bookkeeping) {
		return true
	}
	r := registered.Load()
	return r != nil && matchesAny(l, *r)
}

// matchesAny reports whether the lowercase name l is one of names or
// starts with one of its prefixes.
func matchesAny(l string, names []string) bool {
	for _, p := range names {
		if l == p || strings.HasPrefix(l, p) && (strings.HasSuffix(p, "-") || strings.HasSuffix(p, ".")) {
			return true
		}
	}
	return false
}

// Prepare builds what is published for the message of lease in batch b:
// the current payload and content type, the original headers less broker
// bookkeeping and redacted ones (returned, sorted, in dropped), the
// idempotency key, and the replay headers.
func Prepare(b *quarantine.ReplayBatch, lease quarantine.ReplayLease, queue string) (out Outgoing, dropped []string) {
	m := lease.Message
	h := make(map[string]string, len(m.Headers)+5)
	for k, v := range m.Headers {
		switch {
		case isBookkeeping(k):
		case v == RedactedValue:
			dropped = append(dropped, k)
		default:
			h[k] = v
		}
	}
	sort.Strings(dropped)
	if m.IdempotencyKey != "" {
		if _, ok := headerLookup(h, HeaderIdempotencyKey); !ok {
			h[HeaderIdempotencyKey] = m.IdempotencyKey
		}
	}
	if m.JobName != "" {
		h[HeaderJobName] = m.JobName
	}
	h[HeaderReplayID] = b.ID
	h[HeaderReplayedBy] = b.Actor
	h[HeaderOriginalID] = m.ID
	return Outgoing{
		Queue:          queue,
		MessageID:      "replay-" + b.ID + "-" + m.ID,
		IdempotencyKey: m.IdempotencyKey,
		JobName:        m.JobName,
		ContentType:    m.ContentType,
		Payload:        m.Payload,
		Headers:        h,
		Message:        m,
	}, dropped
}

func headerLookup(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
