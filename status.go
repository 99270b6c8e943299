package quarantine

// Status is where a quarantined message stands in its life.
type Status string

// The statuses of a message.
const (
	StatusQuarantined Status = "quarantined" // collected, waiting for its owner
	StatusReplaying   Status = "replaying"   // in a replay batch, not yet published
	StatusReplayed    Status = "replayed"    // published back to its queue
	StatusRefailed    Status = "refailed"    // replayed, then failed again (see RefailOf)
	StatusDiscarded   Status = "discarded"   // given up on by an operator; kept, not deleted
)

// Statuses lists every status in display order.
var Statuses = []Status{StatusQuarantined, StatusReplaying, StatusReplayed, StatusRefailed, StatusDiscarded}

// transitions is the one place that says which status may follow which.
var transitions = map[Status][]Status{
	StatusQuarantined: {StatusReplaying, StatusDiscarded},
	StatusReplaying:   {StatusReplayed, StatusQuarantined, StatusRefailed}, // published; the item was cancelled or failed; or it came back failing before its publish was recorded
	StatusReplayed:    {StatusRefailed, StatusDiscarded},
	StatusRefailed:    {StatusDiscarded},
	StatusDiscarded:   nil,
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// CanBecome reports whether a message in status s may move to next.
func (s Status) CanBecome(next Status) bool {
	for _, t := range transitions[s] {
		if t == next {
			return true
		}
	}
	return false
}

// Transition returns nil when s may become next, and an ECONFLICT error
// naming both statuses otherwise.
func (s Status) Transition(next Status) error {
	if !next.Valid() {
		return FieldErrorf(EINVALID, "status", "unknown status %q", next)
	}
	if !s.CanBecome(next) {
		return Errorf(ECONFLICT, "a %s message cannot become %s", s, next)
	}
	return nil
}

// ParseStatus returns the status named s, or an EINVALID error.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", FieldErrorf(EINVALID, "status", "unknown status %q (one of quarantined, replaying, replayed, refailed, discarded)", truncateForError(s))
	}
	return st, nil
}

// FailureClass says why a job was dead-lettered.
type FailureClass string

// The failure classes.
const (
	ClassPermanent     FailureClass = "permanent"      // the worker judged it unrecoverable
	ClassExhausted     FailureClass = "exhausted"      // retries ran out
	ClassUnknownName   FailureClass = "unknown_name"   // no handler for the job name
	ClassMalformed     FailureClass = "malformed"      // the body could not be decoded; stored raw
	ClassRejected      FailureClass = "rejected"       // broker: rejected/nacked without requeue
	ClassExpired       FailureClass = "expired"        // broker: TTL expired
	ClassDeliveryLimit FailureClass = "delivery_limit" // broker: delivery limit reached
	ClassOverflow      FailureClass = "overflow"       // broker: dropped by a full queue's length limit
	ClassUnknown       FailureClass = "unknown"        // not said
)

// FailureClasses lists every failure class.
var FailureClasses = []FailureClass{ClassPermanent, ClassExhausted, ClassUnknownName, ClassMalformed,
	ClassRejected, ClassExpired, ClassDeliveryLimit, ClassOverflow, ClassUnknown}

// Valid reports whether c is a known failure class.
func (c FailureClass) Valid() bool {
	for _, k := range FailureClasses {
		if c == k {
			return true
		}
	}
	return false
}

// ParseFailureClass returns the class named s, or an EINVALID error.
func ParseFailureClass(s string) (FailureClass, error) {
	c := FailureClass(s)
	if !c.Valid() {
		return "", FieldErrorf(EINVALID, "failure_class", "unknown failure class %q", truncateForError(s))
	}
	return c, nil
}

// SourceKind is the kind of collector a message came through.
type SourceKind string

// The source kinds.
const (
	SourceRabbitMQ SourceKind = "rabbitmq"
	SourceSQS      SourceKind = "sqs"
	SourceNATS     SourceKind = "nats"
	SourceKafka    SourceKind = "kafka"
	SourcePubSub   SourceKind = "pubsub"
	SourceHTTP     SourceKind = "http"
	SourceMemory   SourceKind = "memory"
	// SourceCloudflare is a Cloudflare Queues dead-letter queue drained
	// by the Worker of integrations/cloudflare into HTTP ingest.
	SourceCloudflare SourceKind = "cloudflare"
)

// Valid reports whether k is a known source kind.
func (k SourceKind) Valid() bool {
	switch k {
	case SourceRabbitMQ, SourceSQS, SourceNATS, SourceKafka, SourcePubSub, SourceHTTP, SourceMemory, SourceCloudflare:
		return true
	}
	return false
}

// Editable returns nil when a message in status s may have its payload
// edited, and ECONFLICT otherwise: not while it is being replayed, and not
// once it is discarded.
func (s Status) Editable() error {
	switch s {
	case StatusReplaying:
		return Errorf(ECONFLICT, "the message is being replayed: edit it once the replay is done")
	case StatusDiscarded:
		return Errorf(ECONFLICT, "the message was discarded: it cannot be edited")
	}
	return nil
}
