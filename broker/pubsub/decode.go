package pubsub

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	ps "cloud.google.com/go/pubsub/v2"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
)

// The attributes Pub/Sub adds to a message it forwards to a dead-letter
// topic (a subscription's dead-letter policy, after max delivery
// attempts).
const (
	// AttrSourceSubscription is the ID of the subscription that gave up.
	AttrSourceSubscription = "CloudPubSubDeadLetterSourceSubscription"
	// AttrSourceProject is that subscription's project.
	AttrSourceProject = "CloudPubSubDeadLetterSourceSubscriptionProject"
	// AttrSourcePublishTime is when the message was published to the
	// source topic (RFC 3339).
	AttrSourcePublishTime = "CloudPubSubDeadLetterSourceTopicPublishTime"
	// AttrSourceDeliveryCount is how many times the source subscription
	// delivered the message.
	AttrSourceDeliveryCount = "CloudPubSubDeadLetterSourceDeliveryCount"
	// AttrSourceError is the last delivery error, which Pub/Sub adds for
	// some subscriptions (push, export).
	AttrSourceError = "CloudPubSubDeadLetterSourceDeliveryErrorMessage"

	attrPrefix = "CloudPubSubDeadLetterSource"
)

// Headers the collector adds to describe the dead-letter message itself;
// the replay publisher reads the ordering key back and sends none of them.
const (
	HeaderOrderingKey  = "x-pubsub-ordering-key" // the message's ordering key
	HeaderMessageID    = "x-pubsub-message-id"   // the dead-letter message's ID
	HeaderPublishTime  = "x-pubsub-publish-time" // when it was published to the dead-letter topic, RFC 3339 (ms)
	HeaderSubscription = "x-pubsub-subscription" // the subscription it was collected from
	HeaderSourceTopic  = "x-pubsub-source-topic" // the source subscription's topic, as looked up
	headerPrefix       = "x-pubsub-"
)

// DedupeKey is the dedupe key of the message id collected from the
// subscription sub: Pub/Sub message ids are unique within a topic, and a
// redelivery (the collector stopped before its ack) keeps its id.
func DedupeKey(sub, id string) string { return sub + "/" + id }

// topicOf names the topic a source subscription (project, id) reads, as a
// queue: the topic's ID in the collector's project, projects/P/topics/T
// in another; "" and why when it cannot be found.
type topicOf func(project, sub string) (queue string, problem string)

// decoder turns messages of one subscription into quarantine messages.
type decoder struct {
	source      string // the collector's name
	sub         string // the dead-letter subscription, projects/P/subscriptions/S
	project     string // the collector's project
	sourceTopic string // the queue of a message that names none
	topicOf     topicOf
}

// decode turns one dead-letter message into a quarantine message. It
// never fails: whatever the data and attributes hold, the data is kept
// byte-exact, and what was wrong is flagged and said in the reason.
func (dc decoder) decode(pm *ps.Message) *quarantine.Message {
	var m *quarantine.Message
	_, forwarded := pm.Attributes[AttrSourceSubscription]
	switch {
	case claimsEnvelope(pm.Data) && (!forwarded || collect.IsEnvelope(pm.Data)):
		m, _ = collect.DecodeEnvelope(pm.Data, collect.Origin{Source: dc.source, Kind: quarantine.SourcePubSub})
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		for k, v := range pm.Attributes {
			if _, ok := m.Headers[k]; !ok && k != "content-type" {
				m.Headers[k] = v
			}
		}
		if m.FailedAt.IsZero() {
			m.FailedAt = pm.PublishTime
		}
	case forwarded:
		m = dc.forwarded(pm)
	default:
		m = collect.Unrecognised(dc.base(pm), "a message forwarded by a Pub/Sub dead-letter policy (no "+
			AttrSourceSubscription+" attribute)")
	}
	if m.Queue == "" {
		m.Queue = dc.sourceTopic
	}
	if m.MessageID == "" {
		m.MessageID = pm.ID
	}
	m.Headers[HeaderMessageID] = pm.ID
	m.Headers[HeaderSubscription] = dc.sub
	if pm.OrderingKey != "" {
		m.Headers[HeaderOrderingKey] = pm.OrderingKey
	}
	if !pm.PublishTime.IsZero() {
		m.Headers[HeaderPublishTime] = pm.PublishTime.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	m.DedupeKey = DedupeKey(dc.sub, pm.ID)
	if m.Flags == nil {
		m.Flags = []string{}
	}
	return m
}

// base is what every non-envelope message gives: the data byte-exact,
// the attributes as headers, the content type.
func (dc decoder) base(pm *ps.Message) *quarantine.Message {
	h := make(map[string]string, len(pm.Attributes)+5)
	for k, v := range pm.Attributes {
		h[k] = v
	}
	m := collect.Raw(dc.source, quarantine.SourcePubSub, pm.Data, h)
	m.FailedAt = pm.PublishTime
	return m
}

// forwarded decodes a message a dead-letter policy forwarded: the source
// subscription gave up after its max delivery attempts.
func (dc decoder) forwarded(pm *ps.Message) *quarantine.Message {
	m := dc.base(pm)
	a := pm.Attributes
	sub, project := a[AttrSourceSubscription], a[AttrSourceProject]
	if project == "" {
		project = dc.project
	}
	m.FailureClass = quarantine.ClassExhausted
	var problems []string
	var b strings.Builder
	b.WriteString("Pub/Sub: subscription " + sub)
	if project != dc.project {
		b.WriteString(" (project " + project + ")")
	}
	b.WriteString(" gave up")
	if v, ok := a[AttrSourceDeliveryCount]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			problems = append(problems, AttrSourceDeliveryCount+" must be a count, got "+strconv.Quote(quarantine.Clip(v)))
		} else {
			m.Attempts = n
			b.WriteString(" after " + strconv.Itoa(n) + " deliveries")
		}
	}
	if e := a[AttrSourceError]; e != "" {
		b.WriteString(": " + e)
	} else {
		b.WriteString(" (max delivery attempts of its dead-letter policy)")
	}
	m.Reason = b.String()
	if v, ok := a[AttrSourcePublishTime]; ok {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v)); err == nil {
			t = t.UTC()
			m.EnqueuedAt = &t
		} else {
			problems = append(problems, AttrSourcePublishTime+" must be an RFC 3339 time, got "+strconv.Quote(quarantine.Clip(v)))
		}
	}
	if _, _, err := split(sub, "subscriptions"); err != nil {
		problems = append(problems, AttrSourceSubscription+": "+err.Error())
	} else if dc.topicOf != nil {
		q, problem := dc.topicOf(project, sub)
		if q != "" {
			m.Queue = q
			m.Headers[HeaderSourceTopic] = fullName(dc.project, "topics", q)
		} else if problem != "" && dc.sourceTopic == "" {
			m.Reason += "; the source topic is unknown: " + problem
		}
	}
	if len(problems) > 0 {
		m.AddFlag(quarantine.FlagMalformed)
		m.Reason += "; malformed dead-letter attributes: " + strings.Join(problems, "; ")
	}
	return m
}

// claimsEnvelope is the cheap test: an object that mentions "envelope".
func claimsEnvelope(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(`"envelope"`))
}

// deadLetterAttributes are the attributes a dead-letter policy adds when
// it forwards a message. They describe the dead-lettering, not the job:
// no replay copies them, whatever broker it goes to (init registers them
// with the replay engine, which drops them in replay.Prepare). The replay
// engine matches a prefix only when it ends in "-" or ".", so the names
// are listed; the Pub/Sub publisher also drops any other attribute of the
// CloudPubSubDeadLetterSource prefix (Bookkeeping).
var deadLetterAttributes = []string{AttrSourceSubscription, AttrSourceProject, AttrSourcePublishTime,
	AttrSourceDeliveryCount, AttrSourceError}

func init() { replay.RegisterBookkeeping(deadLetterAttributes...) }

// Bookkeeping reports whether an attribute was added by a dead-lettering
// (CloudPubSubDeadLetterSource*) or by the collector (x-pubsub-*), and is
// not replayed.
func Bookkeeping(name string) bool {
	return strings.HasPrefix(name, attrPrefix) || strings.HasPrefix(name, headerPrefix)
}
