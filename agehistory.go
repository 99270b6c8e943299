package quarantine

import "time"

// Age history: the age of each queue's oldest quarantined message,
// sampled at most once a minute (alert.AgeSampler) and kept for
// DefaultAgeHistoryKeep by quarter of an hour, so that the overview can
// chart how old the dead letters were over time, not only how old they
// are now.

// DefaultAgeHistoryKeep is how long age samples are kept.
const DefaultAgeHistoryKeep = 7 * 24 * time.Hour

// AgeHistoryStep is the resolution of the age history: the stores keep,
// per queue and owner, the largest age and waiting count sampled in each
// quarter of an hour [s, s+15m) (UTC).
const AgeHistoryStep = 15 * time.Minute

// MaxAgeHistorySteps bounds an AgeHistoryRequest: a week.
const MaxAgeHistorySteps = 7 * 24 * 4

// AgeSampleResult says what one SampleAges call did.
type AgeSampleResult struct {
	// Taken is false when the minute of the call was already sampled
	// (by this or another instance): nothing was written.
	Taken bool
	// Queues is the number of (queue, owner) pairs sampled: those with
	// quarantined messages.
	Queues int
}

// AgeHistoryRequest asks for the age history of the steps from the one
// holding From to the one holding To.
type AgeHistoryRequest struct {
	// Owners, when set, reads only these owners' samples (a scoped
	// token's view).
	Owners []string
	// From and To are truncated to AgeHistoryStep.
	From, To time.Time
}

// Steps returns the start of each step r covers.
func (r *AgeHistoryRequest) Steps() []time.Time {
	from, to := r.From.UTC().Truncate(AgeHistoryStep), r.To.UTC().Truncate(AgeHistoryStep)
	var out []time.Time
	for s := from; !s.After(to); s = s.Add(AgeHistoryStep) {
		out = append(out, s)
	}
	return out
}

// AgeHistory is the answer to an AgeHistoryRequest.
type AgeHistory struct {
	// Steps are the start of each step, ascending.
	Steps []time.Time
	// Samples is, per step, the number of samples taken in it (of any
	// queue): 0 means that no sampler ran then, as opposed to a step
	// sampled while nothing waited.
	Samples []int64
	// Queues are the queues with quarantined messages in at least one
	// sample of the steps (of Owners, when set), ordered by queue.
	Queues []QueueAgeHistory
}

// QueueAgeHistory is one queue's sampled ages, one per step.
type QueueAgeHistory struct {
	Queue string
	// Oldest is the largest age of the queue's oldest quarantined message
	// (of Owners, when set) among the step's samples; 0 when none waited
	// then.
	Oldest []time.Duration
	// Waiting is the largest number of its quarantined messages among the
	// step's samples. With several Owners it is the sum of each owner's
	// largest (at least the largest total, at most their sum).
	Waiting []int64
}

// Validate checks r: EINVALID naming the field.
func (r *AgeHistoryRequest) Validate() error {
	if err := validateValues("owners", r.Owners); err != nil {
		return err
	}
	from, to := r.From.UTC().Truncate(AgeHistoryStep), r.To.UTC().Truncate(AgeHistoryStep)
	if to.Before(from) {
		return FieldErrorf(EINVALID, "to", "the age history ends before it starts")
	}
	if to.Sub(from)/AgeHistoryStep >= MaxAgeHistorySteps {
		return FieldErrorf(EINVALID, "from", "an age history covers at most %d steps of %v", MaxAgeHistorySteps, AgeHistoryStep)
	}
	return nil
}
