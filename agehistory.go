package quarantine

import "time"

// Age history: the age of each queue's oldest quarantined message,
// sampled at most once a minute (alert.AgeSampler) and kept for
// DefaultAgeHistoryKeep, so that the overview can chart how old the dead
// letters were over time, not only how old they are now.

// DefaultAgeHistoryKeep is how long age samples are kept.
const DefaultAgeHistoryKeep = 7 * 24 * time.Hour

// AgeSampleResult says what one SampleAges call did.
type AgeSampleResult struct {
	// Taken is false when the minute of the call was already sampled
	// (by this or another instance): nothing was written.
	Taken bool
	// Queues is the number of (queue, owner) rows written: one per queue
	// and owner with quarantined messages.
	Queues int
}

// AgeHistoryRequest asks for the sampled ages in consecutive windows of
// sample time.
type AgeHistoryRequest struct {
	// Owners, when set, reads only these owners' samples (a scoped
	// token's view).
	Owners []string
	// Edges bound the buckets, strictly ascending: bucket i holds the
	// samples taken at t with Edges[i] < t <= Edges[i+1], compared at
	// the stores' microsecond precision.
	Edges []time.Time
}

// AgeHistory is the answer to an AgeHistoryRequest.
type AgeHistory struct {
	// Samples is, per bucket, the number of samples taken in it (of any
	// queue): 0 means that no sampler ran then, as opposed to a bucket
	// sampled while nothing waited.
	Samples []int64
	// Queues are the queues with quarantined messages in at least one
	// sample of the edges (of Owners, when set), ordered by queue.
	Queues []QueueAgeHistory
}

// QueueAgeHistory is one queue's sampled ages, one per bucket.
type QueueAgeHistory struct {
	Queue string
	// Oldest is the largest age of the queue's oldest quarantined message
	// among the bucket's samples; 0 when none waited then.
	Oldest []time.Duration
	// Waiting is the largest number of its quarantined messages among the
	// bucket's samples.
	Waiting []int64
}

// Validate checks r: EINVALID naming the field.
func (r *AgeHistoryRequest) Validate() error {
	if err := validateValues("owners", r.Owners); err != nil {
		return err
	}
	if len(r.Edges) < 2 || len(r.Edges) > MaxHistogramBuckets+1 {
		return FieldErrorf(EINVALID, "edges", "an age history needs between 1 and %d buckets", MaxHistogramBuckets)
	}
	for i := 1; i < len(r.Edges); i++ {
		if !r.Edges[i-1].Truncate(time.Microsecond).Before(r.Edges[i].Truncate(time.Microsecond)) {
			return FieldErrorf(EINVALID, "edges", "the edges must be strictly ascending (to the microsecond)")
		}
	}
	return nil
}
