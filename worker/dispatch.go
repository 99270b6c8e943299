package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Message is a job message as a producer sends it (see the package
// documentation, "Wire format"): the payload is the body; the key, job
// name and schema version travel as headers.
type Message struct {
	ID          string // transport message id (a fresh ULID from Dispatch)
	Queue       string
	JobName     string
	ContentType string
	Headers     map[string]string
	Body        []byte
}

// Sender publishes job messages to a work queue and returns once the
// backend confirmed. Each broker package implements it beside its Driver.
type Sender interface {
	Send(ctx context.Context, m *Message) error
}

// DispatchOptions are the optional parts of a Dispatch.
type DispatchOptions struct {
	// Headers are extra headers (the worker's own names win).
	Headers map[string]string
	// Now stamps HeaderEnqueuedAt; default time.Now.
	Now func() time.Time
}

// Dispatch sends one job to j.Queue through s. key is the business
// idempotency key (an order id, not a random one: a retried Dispatch of
// the same business action must carry the same key). payload is sent as
// is when it is []byte or json.RawMessage, else JSON-encoded. The content
// type is application/json.
//
// It returns an EINVALID *quarantine.Error when key is empty, j has no
// SchemaVersion or no Queue, or payload does not encode; otherwise the
// Sender's error.
func Dispatch(ctx context.Context, s Sender, j *Job, key string, payload any, opt *DispatchOptions) error {
	m, err := NewMessage(j, key, payload, opt)
	if err != nil {
		return err
	}
	return s.Send(ctx, m)
}

// NewMessage builds the message Dispatch sends.
func NewMessage(j *Job, key string, payload any, opt *DispatchOptions) (*Message, error) {
	switch {
	case j == nil || j.Name == "":
		return nil, quarantine.Errorf(quarantine.EINVALID, "dispatch: the job has no name")
	case key == "":
		return nil, quarantine.Errorf(quarantine.EINVALID, "dispatch %s: a business idempotency key is required", j.Name)
	case j.SchemaVersion == "":
		return nil, quarantine.Errorf(quarantine.EINVALID, "dispatch %s: the job has no SchemaVersion", j.Name)
	case j.Queue == "":
		return nil, quarantine.Errorf(quarantine.EINVALID, "dispatch %s: the job has no Queue", j.Name)
	}
	var body []byte
	switch p := payload.(type) {
	case []byte:
		body = p
	case json.RawMessage:
		body = p
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "dispatch %s: the payload does not encode as JSON: %v", j.Name, err)
		}
		body = b
	}
	if opt == nil {
		opt = &DispatchOptions{}
	}
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	t := now()
	h := make(map[string]string, len(opt.Headers)+4)
	for k, v := range opt.Headers {
		h[k] = v
	}
	h[HeaderIdempotencyKey] = key
	h[HeaderJobName] = j.Name
	h[HeaderSchemaVersion] = j.SchemaVersion
	h[HeaderEnqueuedAt] = t.UTC().Format(time.RFC3339Nano)
	return &Message{
		ID:          quarantine.NewID(t),
		Queue:       j.Queue,
		JobName:     j.Name,
		ContentType: "application/json",
		Headers:     h,
		Body:        body,
	}, nil
}
