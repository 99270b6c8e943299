package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Handler runs one job. Its result decides the delivery's fate: nil acks;
// an ordinary error retries with backoff (dead-letters at the attempt
// cap); RetryAfter picks the delay; Permanent dead-letters at once; Reject
// hands it to the backend's rejection policy. A panic is an ordinary
// error carrying its stack.
type Handler func(ctx context.Context, j *Job, d *Delivery) error

// Job defines one kind of job a worker runs.
type Job struct {
	// Name is the job name carried by every message (HeaderJobName).
	Name string
	// Queue is the work queue the job is sent to (recorded in the failure
	// envelope as the replay destination).
	Queue string
	// SchemaVersion is the payload schema version Dispatch writes;
	// PreviousVersion is the one before it, still accepted by consumers
	// during a rolling deploy. A delivery carrying any other version is
	// dead-lettered as permanent; one carrying none is accepted.
	SchemaVersion   string
	PreviousVersion string
	// MaxAttempts caps attempts, the first one included: at the cap an
	// error dead-letters as exhausted. 0 means no cap. The attempt of a
	// delivery is the larger of the backend's delivery count and the
	// worker's own count (HeaderAttempts) plus one, so a delivery that
	// never settled (the process died) counts too: one that arrives
	// past the cap is dead-lettered without running.
	MaxAttempts int
	// Backoff picks the delay before a retry; nil means
	// Backoff(time.Second, 2, 5*time.Minute). A policy that panics is
	// refused by Register when sampling it panics, and at run time its
	// panic is logged and the default backoff used instead.
	Backoff Policy
	// Timeout is a deadline on the handler's context (cooperative: the
	// handler must watch ctx). 0 means none.
	Timeout time.Duration
	// Concurrency is how many deliveries of this job run at once,
	// retries in the same budget; 0 means 1.
	Concurrency int
	// Handler runs the job.
	Handler Handler
}

// Validate checks the definition itself, before driver limits apply. It
// returns an error naming the field at fault.
func (j *Job) Validate() error {
	switch {
	case j.Name == "":
		return fmt.Errorf("worker: job has no name")
	case j.Handler == nil:
		return fmt.Errorf("worker: job %q has no handler", j.Name)
	case j.MaxAttempts < 0:
		return fmt.Errorf("worker: job %q: MaxAttempts %d is negative", j.Name, j.MaxAttempts)
	case j.Concurrency < 0:
		return fmt.Errorf("worker: job %q: Concurrency %d is negative", j.Name, j.Concurrency)
	case j.Timeout < 0:
		return fmt.Errorf("worker: job %q: Timeout %s is negative", j.Name, j.Timeout)
	}
	if j.Backoff != nil {
		if err := validatePolicy(j.Backoff); err != nil {
			return fmt.Errorf("worker: job %q: %w", j.Name, err)
		}
	}
	return nil
}

func (j *Job) policy() Policy {
	if j.Backoff == nil {
		return defaultBackoff
	}
	return j.Backoff
}

var defaultBackoff = Backoff(time.Second, 2, 5*time.Minute)

func (j *Job) concurrency() int { return max(j.Concurrency, 1) }

// acceptsVersion reports whether a delivery with schema version v may run.
func (j *Job) acceptsVersion(v string) bool {
	return v == "" || j.SchemaVersion == "" || v == j.SchemaVersion || (j.PreviousVersion != "" && v == j.PreviousVersion)
}

// JSON returns a Handler that decodes the payload into a T (encoding/json)
// and calls f with it. A payload that does not decode is dead-lettered at
// once as malformed (the error matches ErrMalformed and ErrPermanent).
func JSON[T any](f func(ctx context.Context, d *Delivery, v T) error) Handler {
	return func(ctx context.Context, _ *Job, d *Delivery) error {
		var v T
		if err := json.Unmarshal(d.Body, &v); err != nil {
			return Permanent(fmt.Errorf("%w: %s", ErrMalformed, compactJSONError(err)))
		}
		return f(ctx, d, v)
	}
}

// compactJSONError says what went wrong without quoting the payload.
func compactJSONError(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q: cannot decode a JSON %s into %s", e.Field, e.Value, e.Type)
	default:
		return "cannot decode the payload: " + err.Error()
	}
}
